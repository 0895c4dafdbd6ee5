"""The run store as the core sees it: claim, complete, fail, release, read; and what it keeps.

The core (`handler`) talks only to this interface, so it knows no database and no client
library: the Firestore ledger (`runonce.store.firestore.LedgerStore`) is the first implementation,
and a second store is one more module. A `Claim` carries the store's fencing token, which only the
store reads. Store failures arrive as runonce's own `StoreUnavailable`, `StoreRejected` and
`StoreDenied` (see `errors`), never as a client library's exceptions.

A run's result is kept as JSON text, or the reason it was not kept (`StoredResult`). Firestore
refuses much that JSON allows (nested arrays, integers of 2^63 and more, map keys that are empty,
too long or shaped `__x__`, nesting deeper than 20, lone surrogates), so the result is stored as
ASCII JSON text, which it always accepts. The job's first answer and every later duplicate are
told the same value: the one the stored text decodes to.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime, timedelta
from enum import Enum
from typing import TYPE_CHECKING, Any, NamedTuple, Protocol

from .._text import describe
from ..contract import Overlap, RunStatus

if TYPE_CHECKING:
    from .requests import RerunRequest

# Larger results are not stored (a Firestore document holds at most 1 MiB).
MAX_RESULT_BYTES = 16 * 1024


class StoredResult(NamedTuple):
    """The result as stored: `text` (JSON), or None and `dropped` saying why it was not stored."""

    text: str | None
    dropped: str | None = None

    @classmethod
    def of(cls, value: Any) -> StoredResult:
        """Encode a job's result in one pass; anything JSON cannot hold is dropped, with the reason."""
        try:
            text = json.dumps(value, allow_nan=False, separators=(",", ":"))
        except Exception as exc:  # TypeError, ValueError, RecursionError, or whatever a value raises
            return cls(None, f"not JSON: {describe(exc, 300)}")
        # ensure_ascii (the default) makes the text ASCII: its length is its size in bytes.
        if len(text) > MAX_RESULT_BYTES:
            return cls(None, f"{len(text)} bytes of JSON, more than the {MAX_RESULT_BYTES} stored")
        return cls(text)

    @classmethod
    def not_stored(cls, reason: str) -> StoredResult:
        """No result kept, for `reason`."""
        return cls(None, reason)

    @classmethod
    def from_record(cls, record: dict[str, Any]) -> StoredResult:
        """The result a ledger record holds (records written before JSON text kept the value itself)."""
        if "result_json" in record:
            return cls(record["result_json"])
        if record.get("result_stored") is False:
            return cls(None, record.get("result_dropped") or "not stored")
        return cls(json.dumps(record.get("result"), default=str))

    @property
    def value(self) -> Any:
        """The stored value (None when nothing is stored), decoded from its text."""
        return None if self.text is None else json.loads(self.text)

    def fields(self) -> dict[str, Any]:
        """The record fields that hold this result."""
        if self.text is None:
            return {"result_stored": False, "result_dropped": self.dropped}
        return {"result_json": self.text, "result_stored": True}

    def answer(self) -> dict[str, Any]:
        """The answer fields that tell this result: `result`, and why it is missing if it is."""
        if self.text is None:
            return {"result": None, "result_stored": False, "result_dropped": self.dropped}
        return {"result": self.value}


class Claim(NamedTuple):
    """This attempt holds the run: it may execute the job, then finish or release the claim."""

    key: str
    attempt_id: str
    attempt: int
    update_time: datetime
    """The fencing token: the record's update time when this attempt last wrote it. Opaque outside
    the ledger, which guards every finishing write by it."""
    reopened: bool = False
    """The run was re-run by an operator (its record keeps a history): releasing the claim ends
    its lease instead of deleting the record, so that history stays."""
    lock: str | None = None
    """The id of the job lock this attempt holds with the run (a `skip` or `wait` job's), or None.
    Every write of the claim writes the lock in the same commit, so the same update time fences
    both, and a finishing write frees it."""


class Done(NamedTuple):
    """Where a completion is also entered in its job's completions (`Run.previous`): the job's
    index id and the run's place in it. The entry is written in the completion's own fenced
    commit, so a run whose completion is recorded is always found there, and no other is."""

    completions: str
    """The job's completions index (`runonce.scheduler.keys.completions`)."""
    order: int
    """The run's schedule time in microseconds since the epoch: the index's order."""
    schedule_time: str
    """The run's schedule time, RFC 3339, as the run's record has it."""


class Previous(NamedTuple):
    """The job's latest completed run scheduled before this one, as `Run.previous` tells it."""

    key: str
    schedule_time: str
    stored: StoredResult

    @property
    def result(self) -> Any:
        """What that run's job returned (None when it was not stored: `stored.dropped` says why)."""
        return self.stored.value


def done_entry(done: Done, key: str, stored: StoredResult, expire_at: datetime) -> dict[str, Any]:
    """The completions entry of run `key` (no `job`, no `status`: no listing reads it as a run)."""
    return {"run_key": key, "schedule_time": done.schedule_time, **stored.fields(), "expire_at": expire_at}


_LAST_ORDER = 10**20 - 1


def done_id(index: str, order: int) -> str:
    """The id of the entry at `order` in `index`: ids sort as their schedule times do, newest first,
    so the latest entry before a time is the first id after that time's (an ascending key scan:
    Firestore has no descending one)."""
    return f"{index}-{_LAST_ORDER - order:020d}"


def previous_of(entry: Mapping[str, Any] | None) -> Previous | None:
    """The Previous a completions entry tells (None: no entry)."""
    if entry is None:
        return None
    return Previous(entry["run_key"], entry["schedule_time"], StoredResult.from_record(dict(entry)))


class Held(NamedTuple):
    """The run is not this attempt's to execute: finished already, or another attempt holds it."""

    key: str
    status: RunStatus
    result: Any = None
    error: str | None = None
    lease_expires: datetime | None = None
    stored: StoredResult | None = None
    """The result as stored (a completed run): the value, or why there is none."""
    skipped_for: str | None = None
    """A skipped run's: the run key of the run that held its job's lock."""


class JobLock(NamedTuple):
    """The lock a run of a `skip` or `wait` job takes with its claim: one record per Scheduler job
    (docs/schedules/overlap.md). An `allow` job has none."""

    id: str
    """The lock record's id (`runonce.scheduler.keys.job_lock`)."""
    policy: Overlap
    """What a run does when another run holds the lock: `skip` or `wait`."""


class Overlapped(NamedTuple):
    """Another run of the job holds its lock under a live lease: under `skip` this run is recorded
    skipped (finished, never run), under `wait` nothing is written and a retry may claim it later."""

    key: str
    policy: Overlap
    holder: str
    """The run key of the run that holds the lock."""
    lease_expires: datetime | None
    """When the holder's lease ends, unless it finishes sooner."""


WAITING_PREFIX = "waiting:"
"""A run of a `wait` job answered 409 `waiting` leaves a note under this prefix and its run key
(docs/schedules/overlap.md): if its retries run out, the watchdog reports it `waited_out`, not
`never_delivered`, and `runonce runs` lists it so. The note has no `job` and no `status` field:
no listing reads it as a run."""


def waiting_note(key: str) -> str:
    """The key of the waiting note of run `key`."""
    return WAITING_PREFIX + key


class Refusal(str, Enum):
    """Why a store refused an operator's change to a record (nothing was written)."""

    NO_RECORD = "no_record"
    """The run has no record."""
    NOT_IN_PROGRESS = "not_in_progress"
    """The run is finished: there is no claim to release."""
    TAKEN_OVER = "taken_over"
    """Another attempt holds the run than the one the operator looked at."""
    LEASE_LIVE = "lease_live"
    """The claim's lease has not ended: its attempt may be alive."""
    REPLAYED = "replayed"
    """The record says the event was replayed already."""
    RECORDED = "recorded"
    """The run already has a record (an excluded run's record is written only where none is)."""


Decision = Callable[[dict[str, Any] | None], Mapping[str, Any] | Refusal]
"""What an operator's change writes, given the record as the store holds it (None: no record):
the fields to write, or a Refusal. A store may ask it more than once (on contention), so it only
computes."""


class Store(Protocol):
    """Where runs are claimed under a lease and finished with fencing."""

    def claim(self, key: str, fields: dict[str, Any]) -> Claim | Held:
        """Claim the run for a new attempt, or say who holds it (a lost race is Held in progress)."""
        ...

    def claim_locked(self, key: str, fields: dict[str, Any], lock: JobLock) -> Claim | Held | Overlapped:
        """`claim`, taking the job's lock with the run in the same write (a `skip` or `wait` job,
        docs/schedules/overlap.md). A run already claimed or finished is answered as by `claim`; a new run, or
        one whose claim's lease ended, meets another run of the job that holds the lock under a live
        lease as Overlapped (recorded skipped first, under `skip`)."""
        ...

    def take_lock(self, claim: Claim, lock: JobLock) -> Claim | Held | Overlapped:
        """Take the job's lock for a claim taken without it (a re-run's, `take_rerun`): the claim,
        now with the lock and a new fence; or Overlapped, the claim then given up as `claim` with
        `lock` would have given it up (skip: the run recorded skipped; wait: its lease ended, so a
        retry takes it over); or Held in progress if the claim no longer holds the run (nothing
        written)."""
        ...

    def exists(self, key: str) -> bool:
        """Whether the run has a record, in any state."""
        ...

    def complete(self, claim: Claim, stored: StoredResult, done: Done | None = None) -> StoredResult | None:
        """Record success with `stored`; the result as recorded, or None if the claim was lost.
        With `done`, the same atomic write enters the run in its job's completions."""
        ...

    def previous(self, index: str, before: int) -> Previous | None:
        """The latest entry of completions `index` ordered before `before` (one read), or None."""
        ...

    def fail(self, claim: Claim, error: str) -> bool:
        """Record a permanent failure; False if the claim was lost (nothing written)."""
        ...

    def release(self, claim: Claim) -> bool:
        """Delete the claim so a retry runs at once (a reopened run's claim: end its lease, so its
        history stays); False if the claim was lost."""
        ...

    def hold(self, claim: Claim, seconds: float, reason: str) -> bool:
        """Keep the claim in progress for `seconds` from now, noting why; False if it was lost."""
        ...

    def read(self, key: str) -> dict[str, Any] | None:
        """The run's record, or None."""
        ...

    def annotate(self, key: str, fields: dict[str, Any]) -> None:
        """Add `fields` to a finished run's record."""
        ...

    def note(self, key: str, fields: dict[str, Any]) -> None:
        """Write the record `key` (not a run's: a note such as `waiting_note`'s) as `fields`, with
        an `expire_at` one retention from now, whatever it held before."""
        ...

    # The operators' verbs (the `runonce` command, docs/operate.md).

    def read_many(self, keys: Sequence[str]) -> dict[str, dict[str, Any]]:
        """The records of those of `keys` that have one, by key."""
        ...

    def find(
        self, equal: Mapping[str, Any], claimed_since: datetime | None = None
    ) -> dict[str, dict[str, Any]]:
        """Every record whose fields equal `equal` (and last claimed at or after `claimed_since`),
        by key."""
        ...

    def amend(self, key: str, decide: Decision) -> dict[str, Any] | Refusal:
        """Read the record and write what `decide` returns, as one atomic step (a transaction): the
        record as written, or `decide`'s Refusal. A record that does not exist is created. The
        write moves the fence, so a claim that saw the record before can no longer finish it."""
        ...

    def release_held(
        self, key: str, attempt_id: str, action: Mapping[str, Any], force: bool = False
    ) -> dict[str, Any] | Refusal:
        """End the lease of the claim `attempt_id` holds now, appending `action` to the record's
        operator actions, so that the run's next delivery takes it over at once. Refused if the run
        has no record, is finished, is held by another attempt, or (unless `force`) its lease is
        live; the record as written otherwise."""
        ...

    # The re-run verbs (`runonce rerun`, docs/rerun.md).

    def request_rerun(
        self, slot: str, key: str, fields: dict[str, Any], insist: bool, ttl: timedelta
    ) -> RerunRequest:
        """Write a pending request to re-run `key` in `slot`, valid `ttl`. `fields` must hold `by`
        and `schedule_time`. RerunRefused if `key` has no record, is in progress, is completed
        (unless `insist`), or `slot` already holds a pending request (RequestPending).

        A request for a missed run (`fields[CAUSE_FIELD]` is `backfill` or `catch_up`) may name a
        run with no record, and carries the state its caller saw (`EXPECTED_ATTEMPT_FIELD`,
        `EXPECTED_STATUS_FIELD`; None for no record): RunChanged if the record is no longer that,
        and it is refused for a completed run whatever `insist` says."""
        ...

    def withdraw_rerun(self, slot: str, request_id: str) -> bool:
        """Withdraw request `request_id` if it is still pending; False if it is not (consumed,
        expired or replaced): nothing is written then."""
        ...

    def take_rerun(self, slot: str, key: str, fields: dict[str, Any]) -> Rerun | None:
        """For a forced delivery (run key `key`, its claim `fields`): the re-run it carries, or None.

        In one transaction with the reopening of the re-run run: a pending request in `slot` is
        consumed, `key` is recorded as that re-run's delivery, and the run's finished state moves
        into its history (a missed run's request creates its claim when it has no record). A
        later delivery under `key` is told the same re-run (claim None), unless that re-run has
        finished and a newer request is pending: `key` then carries the newer one (a forced
        delivery has the same key until the job's next scheduled time).
        """
        ...


# A finished run run again (`runonce rerun`, docs/rerun.md): the operator's request, kept in the
# ledger under the job's re-run slot until a forced delivery of that job consumes it.

RERUN_OF_FIELD = "rerun_of"
"""On a forced delivery's record that carried a re-run: the run key of the run it re-ran."""
RERUN_TIME_FIELD = "rerun_schedule_time"
"""On that record: the re-run run's schedule time (RFC 3339), to claim it again on a retry."""
RERUN_CAUSE_FIELD = "rerun_cause"
"""On that record: the `cause` of the request it consumed, told to its later deliveries."""
REQUEST_STATE_FIELD = "rerun_state"
"""On a re-run request: a `RequestState` value."""
RERUN_REQUEST_FIELD = "rerun_request"
"""On a forced delivery's record that carried a re-run: the id of the request it consumed."""
CAUSE_FIELD = "cause"
"""On a request, and on the run it started or reopened: a `Cause` value (a request without one
is a re-run)."""
CAUSE_REQUEST_FIELD = "cause_request"
"""On that run: the id of the request that started or reopened it."""
CAUSE_BY_FIELD = "cause_by"
"""On that run: who filed that request."""
EXPECTED_ATTEMPT_FIELD = "expected_attempt"
"""On a missed run's request: the attempt id its record had when the request was filed (None:
no record). The delivery starts the run only if the record still has it."""
EXPECTED_STATUS_FIELD = "expected_status"
"""On a missed run's request: the status its record had then (None: no record)."""


class Cause(str, Enum):
    """What started a run other than its own scheduled delivery (the `cause` field)."""

    RERUN = "rerun"
    """`runonce rerun`: an operator ran a finished run again."""
    BACKFILL = "backfill"
    """`runonce backfill`: an operator ran a missed run of a past window."""
    CATCH_UP = "catch_up"
    """The watchdog ran a missed run within its job's catch-up window."""


MISSED_RUN_CAUSES = frozenset({Cause.BACKFILL.value, Cause.CATCH_UP.value})
"""The causes whose requests may name a run with no record (a missed run)."""


class RequestState(str, Enum):
    """Where a re-run request stands (its `rerun_state` field)."""

    PENDING = "pending"
    """Written; the next forced delivery of the job consumes it, unless it expires first."""
    CONSUMED = "consumed"
    """A forced delivery took it: the run was reopened for a new attempt."""
    WITHDRAWN = "withdrawn"
    """Its command withdrew it (the `jobs.run` call failed)."""
    VOID = "void"
    """A forced delivery found the run not finished, or gone: nothing was reopened."""


class Rerun(NamedTuple):
    """A forced delivery that carries the re-run of run `key` (scheduled at `schedule_time`)."""

    key: str
    schedule_time: str
    claim: Claim | None
    """The claim of the reopened run when this delivery consumed the request; None when an earlier
    delivery with the same headers did (a retry of it): the run is then claimed as usual."""
    cause: str = "rerun"
    """What filed the request (a `Cause` value): the answer line carries it as `cause`."""
