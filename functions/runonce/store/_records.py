"""A run record's fields, written and read alike by every store here (the ledger and `memory`)."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime, timedelta
from typing import Any

from .._text import MAX_ERROR_CHARS, clip
from .._version import __version__
from ..contract import (
    ACTIONS_FIELD,
    CLAIMED_AT_FIELD,
    EXPIRE_AT_FIELD,
    HISTORY_FIELD,
    SKIPPED_FOR_FIELD,
    VERSION_FIELD,
    RunStatus,
)
from ..core.store import (
    CAUSE_BY_FIELD,
    CAUSE_FIELD,
    CAUSE_REQUEST_FIELD,
    EXPECTED_ATTEMPT_FIELD,
    EXPECTED_STATUS_FIELD,
    MISSED_RUN_CAUSES,
    REQUEST_STATE_FIELD,
    RERUN_CAUSE_FIELD,
    RERUN_OF_FIELD,
    RERUN_REQUEST_FIELD,
    RERUN_TIME_FIELD,
    Cause,
    Claim,
    Decision,
    Held,
    JobLock,
    Overlapped,
    Refusal,
    RequestState,
    Rerun,
    StoredResult,
)


def lease_fields(attempt_id: str, now: datetime, lease: timedelta, retention: timedelta) -> dict[str, Any]:
    """What a claim writes: in progress for `attempt_id` until the lease ends, kept `retention`."""
    return {
        "status": RunStatus.IN_PROGRESS.value,
        VERSION_FIELD: __version__,  # the claim's and a take-over's: which code runs it
        "attempt_id": attempt_id,
        "lease_expires": now + lease,
        "expire_at": now + retention,
        CLAIMED_AT_FIELD: now,
    }


def finish_fields(
    status: RunStatus, fields: dict[str, Any], now: datetime, retention: timedelta
) -> dict[str, Any]:
    """What a finishing write (complete, fail) writes: `fields`, the status, the version of the code
    that finished it, and when."""
    return {
        **fields,
        "status": status.value,
        VERSION_FIELD: __version__,
        "finished_at": now,
        "expire_at": now + retention,
    }


def hold_fields(now: datetime, seconds: float, reason: str) -> dict[str, Any]:
    """What a hold writes: the lease extended `seconds` from now, and why."""
    return {
        "lease_expires": now + timedelta(seconds=seconds),
        "held_at": now,
        "held_reason": clip(reason, MAX_ERROR_CHARS),
    }


def held(key: str, status: RunStatus, record: dict[str, Any]) -> Held:
    """The run `record` describes as Held: its status, error, lease and (completed) stored result."""
    stored = StoredResult.from_record(record) if status is RunStatus.COMPLETED else None
    return Held(
        key,
        status,
        stored.value if stored is not None else None,
        record.get("error"),
        record.get("lease_expires"),
        stored,
        record.get(SKIPPED_FOR_FIELD),
    )


# The job lock of a `skip` or `wait` job (docs/schedules/overlap.md), alike in every store. Its record has no
# `job` and no `status` field, so no listing of runs ever reads it as a run.

LOCK_HOLDER_FIELD = "lock_holder"
"""On a job lock's record: the run key of the run that holds it."""
LOCK_ATTEMPT_FIELD = "lock_attempt_id"
"""On a job lock's record: the attempt of that run that holds it."""


def lock_record(key: str, lease: Mapping[str, Any], now: datetime) -> dict[str, Any]:
    """The job lock held by run `key`'s attempt under `lease` (a claim's `lease_fields`): the lock
    ends with that attempt's lease, and its record is deleted by the TTL like a run's."""
    return {
        LOCK_HOLDER_FIELD: key,
        LOCK_ATTEMPT_FIELD: lease["attempt_id"],
        "lease_expires": lease["lease_expires"],
        "locked_at": now,
        EXPIRE_AT_FIELD: lease[EXPIRE_AT_FIELD],
        VERSION_FIELD: __version__,
    }


def lock_rival(lock: Mapping[str, Any] | None, key: str, now: datetime) -> str | None:
    """The run key of another run that may hold the job lock `lock` against run `key`: None when
    the lock is free by its own record (none, run `key`'s own, or its lease over). Whether that
    run does hold it, its record tells (`lock_held`)."""
    if lock is None or lock.get(LOCK_HOLDER_FIELD) == key or not lease_live(dict(lock), now):
        return None
    return str(lock[LOCK_HOLDER_FIELD])


def lock_held(lock: Mapping[str, Any], holder: Mapping[str, Any] | None, now: datetime) -> bool:
    """Whether the run whose record is `holder` still holds the job lock `lock`: in progress, by
    the attempt the lock names, under a live lease. A finished run, an attempt taken over, and a
    lease an operator ended (`runonce release`) all free the lock, whatever the lock's own lease."""
    return (
        holder is not None
        and holder.get("status") == RunStatus.IN_PROGRESS.value
        and holder.get("attempt_id") == lock.get(LOCK_ATTEMPT_FIELD)
        and lease_live(dict(holder), now)
    )


def sent_again(
    record: Mapping[str, Any], lock: Mapping[str, Any] | None, attempt_id: str, together: bool, now: datetime
) -> bool | str | None:
    """What a `take_lock` sent again after a lost answer finds of its own first send, given the
    run's `record` (this attempt's) and the `lock`'s (`together`: written in one commit): True if
    it took the lock; the holder's run key if it recorded an overlap (skip: the run skipped; wait:
    its lease ended); None if neither."""
    running = record.get("status") == RunStatus.IN_PROGRESS.value
    if running and together and lock is not None and lock.get(LOCK_ATTEMPT_FIELD) == attempt_id:
        return True
    if record.get("status") == RunStatus.SKIPPED.value and record.get(SKIPPED_FOR_FIELD):
        return str(record[SKIPPED_FOR_FIELD])
    released = running and "released_at" in record and not lease_live(dict(record), now)
    if released and lock is not None and lock.get(LOCK_HOLDER_FIELD):
        return str(lock[LOCK_HOLDER_FIELD])
    return None


def lock_taken_fields(now: datetime) -> dict[str, Any]:
    """What a claim that takes the job lock afterwards writes on its run (`Store.take_lock`): a
    write that changes the record, so that it moves the fence."""
    return {"lock_taken_at": now}


def skipped_fields(holder: str, now: datetime, retention: timedelta) -> dict[str, Any]:
    """What recording a run skipped writes (over its claim fields, or over its record)."""
    return {
        "status": RunStatus.SKIPPED.value,
        SKIPPED_FOR_FIELD: holder,
        VERSION_FIELD: __version__,
        "finished_at": now,
        EXPIRE_AT_FIELD: now + retention,
    }


def skipped_record(
    fields: Mapping[str, Any], holder: str, now: datetime, retention: timedelta
) -> dict[str, Any]:
    """The record of a run skipped at its first delivery: never claimed, so no attempt."""
    return {**fields, **skipped_fields(holder, now, retention), "attempts": 0, CLAIMED_AT_FIELD: now}


def overlapped(key: str, lock: JobLock, holder: str, record: Mapping[str, Any]) -> Overlapped:
    """What run `key` is told when run `holder` holds the job lock whose record is `record`."""
    return Overlapped(key, lock.policy, holder, record.get("lease_expires"))


# The re-run records (`runonce rerun`, docs/rerun.md), alike in every store.

_FINISHED_FIELDS = (
    "status",
    "error",
    "result_json",
    "result_stored",
    "result_dropped",
    "result",
    "attempts",
    "attempt_id",
    "claimed_at",
    "finished_at",
    "held_at",
    "held_reason",
    SKIPPED_FOR_FIELD,
    VERSION_FIELD,
)
"""What a finished run's history entry keeps of its record."""
MAX_HISTORY_RESULT_CHARS = 1024
"""A history entry keeps a result of at most this many characters of JSON (ASCII: bytes)."""
_CLEARED_ON_REOPEN = (
    "error",
    "result_json",
    "result_stored",
    "result_dropped",
    "result",
    "finished_at",
    "held_at",
    "held_reason",
    SKIPPED_FOR_FIELD,
)
"""A reopened run's fields that belonged to its finished attempt (kept in its history)."""


def released_fields(now: datetime) -> dict[str, Any]:
    """What releasing a reopened run's claim writes: its lease ends now, so a retry takes it over
    at once, and its record (with its history) stays."""
    return {"lease_expires": now, "released_at": now}


def pending_request(slot: dict[str, Any] | None, now: datetime) -> bool:
    """Whether a slot's record is a request a forced delivery may consume: pending, not expired."""
    return (
        slot is not None
        and slot.get(REQUEST_STATE_FIELD) == RequestState.PENDING.value
        and slot["request_expires"] > now
    )


def may_consume(delivered: dict[str, Any] | None, slot: dict[str, Any] | None, now: datetime) -> bool:
    """Whether a forced delivery whose key has the record `delivered` (None: none yet) may consume
    the request `slot` holds: it is pending, and the key is new, or carried an earlier request and
    this one is a missed run's (a forced delivery's key is the same until the job's next scheduled
    time, so a backfill could start one run per interval otherwise; the store then checks that the
    run the key carried has finished, so this delivery is no retry that run still needs)."""
    if not pending_request(slot, now):
        return False
    assert slot is not None
    if delivered is None:
        return True
    return (
        bool(delivered.get(RERUN_OF_FIELD))
        and slot.get(CAUSE_FIELD) in MISSED_RUN_CAUSES
        and delivered.get(RERUN_REQUEST_FIELD) != slot["request_id"]
    )


_ENDED = (RunStatus.COMPLETED.value, RunStatus.FAILED.value, RunStatus.SKIPPED.value)


def finished(record: dict[str, Any] | None) -> bool:
    """Whether a run's record is finished (completed, failed or skipped), or gone."""
    return record is None or record.get("status") in _ENDED


def takeable(record: dict[str, Any] | None, request: dict[str, Any], now: datetime) -> bool:
    """Whether a consumed `request` may start its run, whose record is `record` (None: none): a
    re-run's if it is `reopenable`; a missed run's if the record is still what the request saw
    and the run is not completed."""
    if request.get(CAUSE_FIELD) not in MISSED_RUN_CAUSES:
        return reopenable(record, now)
    seen = (request.get(EXPECTED_ATTEMPT_FIELD), request.get(EXPECTED_STATUS_FIELD))
    if record is None:
        return seen == (None, None)
    now_is = (record.get("attempt_id"), record.get("status"))
    return now_is == seen and record.get("status") != RunStatus.COMPLETED.value and reopenable(record, now)


def taken_record(
    record: dict[str, Any] | None,
    request: dict[str, Any],
    lease: dict[str, Any],
    fields: dict[str, Any],
    delivery_key: str,
    now: datetime,
) -> dict[str, Any]:
    """The run a consumed `request` starts: its `record` reopened, or (a missed run with no
    record) a new claim with the forced delivery's `fields` but the run's schedule time."""
    if record is not None:
        return reopened_record(record, request, lease, delivery_key, now)
    run = {**fields, "schedule_time": request["schedule_time"], "forced": False}
    return {**run, **lease, "attempts": 1, **_caused(request, delivery_key, now, "a missed run")}


_SAID = {Cause.RERUN.value: "re-run", Cause.BACKFILL.value: "backfill", Cause.CATCH_UP.value: "catch-up"}


def request_cause(request: Mapping[str, Any]) -> str:
    """The `Cause` value a request was filed with (a request without one is a re-run)."""
    return request.get(CAUSE_FIELD) or Cause.RERUN.value


def _caused(request: dict[str, Any], delivery_key: str, now: datetime, what: str) -> dict[str, Any]:
    """What a consumed request writes on the run it starts: its cause, and the operator action."""
    cause = request_cause(request)
    action = {
        "action": cause,
        "by": request["requested_by"],
        "at": now,
        "detail": (
            f"{_SAID[cause]} of {what}, requested at {request['requested_at'].isoformat()} "
            f"(request {request['request_id']}), delivered by the forced delivery {delivery_key}"
        ),
    }
    return {
        CAUSE_FIELD: cause,
        CAUSE_REQUEST_FIELD: request["request_id"],
        CAUSE_BY_FIELD: request["requested_by"],
        ACTIONS_FIELD: [action],
    }


def told_rerun(record: dict[str, Any]) -> Rerun | None:
    """The re-run an existing forced delivery's record carried (None: an ordinary forced run)."""
    key = record.get(RERUN_OF_FIELD)
    cause = record.get(RERUN_CAUSE_FIELD) or Cause.RERUN.value
    return Rerun(key, record[RERUN_TIME_FIELD], None, cause) if key else None


def reopenable(record: dict[str, Any] | None, now: datetime) -> bool:
    """Whether a consumed request may reopen the run: it is finished, or in progress under a lease
    that ended with no retry to take it over (the watchdog's `retried_out`; a release ends a
    lease too). Reopening moves the fence, as a takeover does: the dead attempt can finish nothing."""
    if record is None:
        return False
    status = record.get("status")
    return status in _ENDED or (status == RunStatus.IN_PROGRESS.value and not lease_live(record, now))


def lease_live(record: dict[str, Any], now: datetime) -> bool:
    """Whether the record's lease has not ended (a record without one counts as live)."""
    lease = record.get("lease_expires")
    return not isinstance(lease, datetime) or lease > now


def void_fields(now: datetime, delivery_key: str) -> dict[str, Any]:
    """What a forced delivery writes on a request whose run is not finished, or gone."""
    return {REQUEST_STATE_FIELD: RequestState.VOID.value, "consumed_by": delivery_key, "consumed_at": now}


def consumed_fields(now: datetime, delivery_key: str) -> dict[str, Any]:
    """What the forced delivery that consumes a request writes on it."""
    return {REQUEST_STATE_FIELD: RequestState.CONSUMED.value, "consumed_by": delivery_key, "consumed_at": now}


def reopened_record(
    record: dict[str, Any], request: dict[str, Any], lease: dict[str, Any], delivery_key: str, now: datetime
) -> dict[str, Any]:
    """The finished run `record` reopened for a new attempt under `lease`: its finished state
    appended to its history, the operator's action recorded, its result and error cleared."""
    entry = {name: record[name] for name in _FINISHED_FIELDS if name in record}
    kept_result = entry.get("result_json")
    if isinstance(kept_result, str) and len(kept_result) > MAX_HISTORY_RESULT_CHARS:
        # Every re-run adds an entry, and a record holds at most 1 MiB: history keeps small results.
        del entry["result_json"]
        entry.update(result_stored=False, result_dropped=f"{len(kept_result)} bytes, not kept in history")
    caused = _caused(request, delivery_key, now, f"a {record.get('status')} run")
    kept = {name: value for name, value in record.items() if name not in _CLEARED_ON_REOPEN}
    return {
        **kept,
        **lease,
        **caused,
        "attempts": int(record.get("attempts", 0)) + 1,
        "previous_attempt_id": record.get("attempt_id"),
        HISTORY_FIELD: [*record.get(HISTORY_FIELD, []), entry],
        ACTIONS_FIELD: [*record.get(ACTIONS_FIELD, []), *caused[ACTIONS_FIELD]],
    }


def marker_record(
    fields: dict[str, Any],
    request: dict[str, Any],
    now: datetime,
    retention: timedelta,
    delivered: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """The record of the forced delivery that consumed `request`: finished, naming the re-run, so
    that every later delivery under its key goes to that re-run. `delivered`: the record the key
    had (it carried an earlier, finished re-run), whose runs it keeps in `carried_before`."""
    before = [] if delivered is None else [*delivered.get("carried_before", []), delivered[RERUN_OF_FIELD]]
    return {
        **fields,
        **({"carried_before": before} if before else {}),
        RERUN_REQUEST_FIELD: request["request_id"],
        "status": RunStatus.COMPLETED.value,
        VERSION_FIELD: __version__,
        RERUN_OF_FIELD: request["rerun_key"],
        RERUN_TIME_FIELD: request["schedule_time"],
        RERUN_CAUSE_FIELD: request_cause(request),
        "result_json": "null",
        "result_stored": True,
        "attempts": 0,
        "claimed_at": now,
        "finished_at": now,
        EXPIRE_AT_FIELD: now + retention,
    }


def consumed_rerun(request: Mapping[str, Any], claim: Claim | None = None) -> Rerun:
    """The re-run a consumed `request` carries, with the claim its delivery holds (None: none)."""
    return Rerun(request["rerun_key"], request["schedule_time"], claim, request_cause(request))


def rerun_claim(request: dict[str, Any], reopened: dict[str, Any], written_at: datetime) -> Rerun:
    """The re-run a consuming delivery executes: the reopened run's claim, fenced at `written_at`."""
    claim = Claim(
        request["rerun_key"], reopened["attempt_id"], reopened["attempts"], written_at, reopened=True
    )
    return consumed_rerun(request, claim)


def with_action(record: Mapping[str, Any] | None, action: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The record's operator actions with `action` appended (the record keeps the whole list)."""
    return [*((record or {}).get(ACTIONS_FIELD) or []), dict(action)]


def release_decision(attempt_id: str, action: Mapping[str, Any], force: bool, now: datetime) -> Decision:
    """`Store.release_held`'s change: the lease ends `now` if `attempt_id` still holds the run."""

    def decide(record: dict[str, Any] | None) -> dict[str, Any] | Refusal:
        if record is None:
            return Refusal.NO_RECORD
        if record.get("status") != RunStatus.IN_PROGRESS.value:
            return Refusal.NOT_IN_PROGRESS
        if record.get("attempt_id") != attempt_id:
            return Refusal.TAKEN_OVER
        if not force and record["lease_expires"] > now:
            return Refusal.LEASE_LIVE
        return {"lease_expires": now, ACTIONS_FIELD: with_action(record, action)}

    return decide
