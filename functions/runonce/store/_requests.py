"""The re-run request's record (`Store.request_rerun` and `withdraw_rerun`, docs/rerun.md and
docs/schedules/backfill.md), written and read alike by every store here. Only the operators' verbs and the
watchdog's catch-up load it; what a forced delivery reads of a request is in `_records`."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from .._instant import parse_instant
from ..contract import EXPIRE_AT_FIELD, RunStatus
from ..core.requests import RequestPending, RerunRefused, RerunRequest, RunChanged
from ..core.store import (
    CAUSE_FIELD,
    EXPECTED_ATTEMPT_FIELD,
    EXPECTED_STATUS_FIELD,
    MISSED_RUN_CAUSES,
    REQUEST_STATE_FIELD,
    RequestState,
)
from ._records import lease_live, pending_request


def refuse(
    key: str,
    record: dict[str, Any] | None,
    slot: dict[str, Any] | None,
    insist: bool,
    now: datetime,
    fields: dict[str, Any] | None = None,
) -> None:
    """Raise RerunRefused if run `key` (its `record`) cannot be re-run now, saying what to do
    instead; the re-run `slot`'s record tells whether a request is already pending. A missed
    run's request (`fields`' cause) expects the record its caller saw: RunChanged if it differs."""
    if fields is not None and fields.get(CAUSE_FIELD) in MISSED_RUN_CAUSES:
        changed = _changed(key, record, fields)
        if changed is not None:
            raise RunChanged(changed)
        insist = False  # a missed run that completed meanwhile is never run again
    elif record is None:
        raise RerunRefused(
            f"run {key} has no record: it never ran (or its record expired), so there is nothing "
            "to re-run; look at it with `runonce show`"
        )
    refusal = _refusal(key, record, insist, now)
    if refusal is not None:
        raise RerunRefused(refusal)
    if pending_request(slot, now):
        assert slot is not None
        raise RequestPending(
            f"the job has a pending re-run request (of run {slot.get('rerun_key')}, by "
            f"{slot.get('requested_by')}, until {slot.get('request_expires')}): wait until it is "
            "delivered or expires"
        )


def _changed(key: str, record: dict[str, Any] | None, fields: dict[str, Any]) -> str | None:
    """Why a missed run's `record` is not what its request expects, or None."""
    seen = (fields.get(EXPECTED_ATTEMPT_FIELD), fields.get(EXPECTED_STATUS_FIELD))
    now_is = (None, None) if record is None else (record.get("attempt_id"), record.get("status"))
    if now_is == seen:
        return None
    state = "no record" if record is None else f"status {record.get('status')}"
    return f"run {key} changed since it was listed (it has {state} now): someone ran it meanwhile"


def _refusal(key: str, record: dict[str, Any] | None, insist: bool, now: datetime) -> str | None:
    if record is None:
        return None
    status = record.get("status")
    if status == RunStatus.IN_PROGRESS.value and lease_live(record, now):
        return (
            f"run {key} is in progress (lease until {record.get('lease_expires')}): wait for it to "
            "finish, or release a dead attempt's claim with `runonce release`"
        )
    if status == RunStatus.COMPLETED.value and not insist:
        return f"run {key} completed: re-running it repeats its effect; pass --insist to run it again anyway"
    return None


def request_record(
    request_id: str, key: str, fields: dict[str, Any], now: datetime, ttl: timedelta, retention: timedelta
) -> dict[str, Any]:
    """A pending re-run request of run `key`, valid `ttl` from `now`; `fields` add `by`,
    `schedule_time` (RFC 3339: RerunRefused if not) and what else the operator's command records."""
    try:
        parse_instant(fields["schedule_time"])
    except (ValueError, TypeError):
        raise RerunRefused(
            f"schedule_time {fields['schedule_time']!r} is not an RFC 3339 time like 2026-11-29T03:00:00Z"
        ) from None
    return {
        **{name: value for name, value in fields.items() if name != "by"},
        REQUEST_STATE_FIELD: RequestState.PENDING.value,
        "request_id": request_id,
        "rerun_key": key,
        "requested_by": fields["by"],
        "requested_at": now,
        "request_expires": now + ttl,
        EXPIRE_AT_FIELD: now + retention,
    }


def request_of(slot: str, record: dict[str, Any]) -> RerunRequest:
    """The request a re-run slot's record holds."""
    return RerunRequest(
        slot,
        record["request_id"],
        record["rerun_key"],
        record["schedule_time"],
        record["requested_by"],
        record["requested_at"],
        record["request_expires"],
    )


def withdrawable(slot: dict[str, Any] | None, request_id: str) -> bool:
    """Whether a slot still holds request `request_id`, pending (expired or not)."""
    return (
        slot is not None
        and slot.get("request_id") == request_id
        and slot.get(REQUEST_STATE_FIELD) == RequestState.PENDING.value
    )


def withdrawn_fields(now: datetime) -> dict[str, Any]:
    """What withdrawing a request writes."""
    return {REQUEST_STATE_FIELD: RequestState.WITHDRAWN.value, "withdrawn_at": now}
