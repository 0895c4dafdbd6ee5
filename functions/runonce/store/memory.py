"""A run store in this process's memory: the core's `Store`, with no database and no Google library.

It keeps the records the Firestore ledger keeps (same fields, same statuses) and answers every call
as the ledger does: a claim under a lease, Held for a live claim or a finished run, a takeover once
the lease has expired, and every finishing write (complete, fail, release, hold) fenced by the
update time the claim last saw. The conformance suite (`tests/store/test_conformance.py`) holds it
to the ledger's answers on the Firestore emulator.

Its clock is injectable, so a test expires a lease by moving the clock instead of sleeping; one
lock makes each call atomic, so concurrent claims of one run are decided as one record decides
them. Nothing is kept beyond the process: it serves tests of the decision logic and local runs,
not production.
"""

from __future__ import annotations

import copy
import threading
import uuid
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from .. import _clock
from .._text import MAX_ERROR_CHARS, clip
from ..contract import CLAIMED_AT_FIELD, HISTORY_FIELD, RunStatus
from ..core.errors import StoreRejected
from ..core.store import Claim, Decision, Held, Refusal, Rerun, StoredResult
from . import _records
from ._records import finish_fields, held, hold_fields, lease_fields, release_decision

if TYPE_CHECKING:
    from ..core.requests import RerunRequest

_TICK = timedelta(microseconds=1)


class MemoryStore:
    """Runs claimed under `lease` and kept `retention` after each write, in a dict behind one lock.

    `clock` gives "now" for leases and retention (default: runonce's clock, see `set_clock`).
    """

    def __init__(
        self,
        lease: timedelta,
        retention: timedelta,
        clock: Callable[[], datetime] = _clock.now,
    ):
        self._lease = lease
        self._retention = retention
        self._clock = clock
        self._lock = threading.Lock()
        self._records: dict[str, dict[str, Any]] = {}
        self._written_at: dict[str, datetime] = {}
        self._last_write = datetime.min.replace(tzinfo=UTC)

    @property
    def lease(self) -> timedelta:
        """How long a claim holds a run before another attempt may take it over."""
        return self._lease

    @property
    def retention(self) -> timedelta:
        """How long a record is kept after its last claim or finish (its `expire_at`)."""
        return self._retention

    def claim(self, key: str, fields: dict[str, Any]) -> Claim | Held:
        """See `Store.claim`."""
        attempt_id = uuid.uuid4().hex
        with self._lock:
            now = self._clock()
            lease = lease_fields(attempt_id, now, self._lease, self._retention)
            record = self._records.get(key)
            if record is None:
                return Claim(key, attempt_id, 1, self._write(key, {**fields, **lease, "attempts": 1}))
            status = RunStatus(record["status"])
            if status is not RunStatus.IN_PROGRESS or record["lease_expires"] > now:
                return held(key, status, record)
            attempt = int(record.get("attempts", 0)) + 1
            taken = {**lease, "attempts": attempt, "previous_attempt_id": record.get("attempt_id")}
            written_at = self._write(key, {**record, **taken})
            return Claim(key, attempt_id, attempt, written_at, reopened=HISTORY_FIELD in record)

    def exists(self, key: str) -> bool:
        """See `Store.exists`."""
        with self._lock:
            return key in self._records

    def complete(self, claim: Claim, stored: StoredResult) -> StoredResult | None:
        """See `Store.complete`."""
        return stored if self._finish(claim, RunStatus.COMPLETED, stored.fields()) else None

    def fail(self, claim: Claim, error: str) -> bool:
        """See `Store.fail`."""
        return self._finish(claim, RunStatus.FAILED, {"error": clip(error, MAX_ERROR_CHARS)})

    def release(self, claim: Claim) -> bool:
        """See `Store.release`. A record already gone counts as released, as in the ledger."""
        if claim.reopened:
            return self._guarded(claim, _records.released_fields(self._clock()), RunStatus.IN_PROGRESS)
        with self._lock:
            if self._holds(claim):
                del self._records[claim.key], self._written_at[claim.key]
                return True
            return claim.key not in self._records

    def hold(self, claim: Claim, seconds: float, reason: str) -> bool:
        """See `Store.hold`."""
        return self._guarded(claim, hold_fields(self._clock(), seconds, reason), RunStatus.IN_PROGRESS)

    def read(self, key: str) -> dict[str, Any] | None:
        """See `Store.read`: a copy, so changing it (nested values too) changes nothing stored."""
        with self._lock:
            record = self._records.get(key)
            return copy.deepcopy(record)

    def annotate(self, key: str, fields: dict[str, Any]) -> None:
        """See `Store.annotate`; StoreRejected if the run has no record."""
        with self._lock:
            record = self._records.get(key)
            if record is None:
                raise StoreRejected(f"the store rejected it: no record of run {key!r} to annotate")
            self._write(key, {**record, **fields})

    def read_many(self, keys: Sequence[str]) -> dict[str, dict[str, Any]]:
        """See `Store.read_many`."""
        with self._lock:
            return {key: copy.deepcopy(self._records[key]) for key in keys if key in self._records}

    def find(
        self, equal: Mapping[str, Any], claimed_since: datetime | None = None
    ) -> dict[str, dict[str, Any]]:
        """See `Store.find`."""
        with self._lock:
            return {
                key: copy.deepcopy(record)
                for key, record in self._records.items()
                if all(name in record and record[name] == value for name, value in equal.items())
                and (claimed_since is None or _claimed_since(record, claimed_since))
            }

    def amend(self, key: str, decide: Decision) -> dict[str, Any] | Refusal:
        """See `Store.amend`."""
        with self._lock:
            record = self._records.get(key)
            decided = decide(copy.deepcopy(record))
            if isinstance(decided, Refusal):
                return decided
            written = {**(record or {}), **decided}
            self._write(key, written)
            return copy.deepcopy(written)

    def release_held(
        self, key: str, attempt_id: str, action: Mapping[str, Any], force: bool = False
    ) -> dict[str, Any] | Refusal:
        """See `Store.release_held`."""
        return self.amend(key, release_decision(attempt_id, action, force, self._clock()))

    def records(self) -> list[dict[str, Any]]:
        """A copy of every record held, in the order the runs were first claimed."""
        with self._lock:
            return copy.deepcopy(list(self._records.values()))

    # The re-run verbs (docs/rerun.md): each one call under the lock, as one transaction.

    def request_rerun(
        self, slot: str, key: str, fields: dict[str, Any], insist: bool, ttl: timedelta
    ) -> RerunRequest:
        """See `Store.request_rerun`."""
        from . import _requests

        with self._lock:
            now = self._clock()
            _requests.refuse(key, self._records.get(key), self._records.get(slot), insist, now, fields)
            written = _requests.request_record(uuid.uuid4().hex, key, fields, now, ttl, self._retention)
            self._write(slot, written)
            return _requests.request_of(slot, written)

    def withdraw_rerun(self, slot: str, request_id: str) -> bool:
        """See `Store.withdraw_rerun`."""
        from . import _requests

        with self._lock:
            record = self._records.get(slot)
            if record is None or not _requests.withdrawable(record, request_id):
                return False
            self._write(slot, {**record, **_requests.withdrawn_fields(self._clock())})
            return True

    def take_rerun(self, slot: str, key: str, fields: dict[str, Any]) -> Rerun | None:
        """See `Store.take_rerun`."""
        with self._lock:
            now = self._clock()
            delivered, request = self._records.get(key), self._records.get(slot)
            told = _records.told_rerun(delivered) if delivered is not None else None
            if not _records.may_consume(delivered, request, now):
                return told
            assert request is not None
            if told is not None and not _records.finished(self._records.get(told.key)):
                return told  # the run it carried may still need this very delivery (a retry)
            target = self._records.get(request["rerun_key"])
            if not _records.takeable(target, request, now):
                self._write(slot, {**request, **_records.void_fields(now, key)})
                return told
            lease = lease_fields(uuid.uuid4().hex, now, self._lease, self._retention)
            reopened = _records.taken_record(target, request, lease, fields, key, now)
            written_at = self._write(request["rerun_key"], reopened)
            self._write(key, _records.marker_record(fields, request, now, self._retention, delivered))
            self._write(slot, {**request, **_records.consumed_fields(now, key)})
            return _records.rerun_claim(request, reopened, written_at)

    def _finish(self, claim: Claim, status: RunStatus, fields: dict[str, Any]) -> bool:
        return self._guarded(claim, finish_fields(status, fields, self._clock(), self._retention), status)

    def _guarded(self, claim: Claim, update: dict[str, Any], status: RunStatus) -> bool:
        """Write `update` if `claim` still holds the run; else whether the record is already this
        attempt's with `status` (the answer the ledger gives when a write of its own landed)."""
        with self._lock:
            if self._holds(claim):
                self._write(claim.key, {**self._records[claim.key], **update})
                return True
            record = self._records.get(claim.key, {})
            return record.get("attempt_id") == claim.attempt_id and record.get("status") == status.value

    def _holds(self, claim: Claim) -> bool:
        """The fence: the record is exactly as this claim last wrote it (lock held)."""
        return self._written_at.get(claim.key) == claim.update_time

    def _write(self, key: str, record: dict[str, Any]) -> datetime:
        """Store a copy of `record` under `key` (what the caller passed in stays the caller's); its
        new update time, later than every earlier one (lock held)."""
        written_at = max(datetime.now(UTC), self._last_write + _TICK)
        self._last_write = written_at
        self._records[key] = copy.deepcopy(record)
        self._written_at[key] = written_at
        return written_at


def _claimed_since(record: dict[str, Any], since: datetime) -> bool:
    """Whether the record was last claimed at or after `since` (as a Firestore range filter, a
    record without the field never matches)."""
    return CLAIMED_AT_FIELD in record and record[CLAIMED_AT_FIELD] >= since
