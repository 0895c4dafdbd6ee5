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
from ..contract import CLAIMED_AT_FIELD, EXPIRE_AT_FIELD, HISTORY_FIELD, Overlap, RunStatus
from ..core.errors import StoreRejected
from ..core.store import (
    Claim,
    Decision,
    Done,
    Held,
    JobLock,
    Overlapped,
    Previous,
    Refusal,
    Rerun,
    StoredResult,
    done_entry,
    done_id,
    previous_of,
)
from . import _records
from ._records import finish_fields, held, hold_fields, lease_fields, lock_record, release_decision

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
        claimed = self._claim(key, fields, None)
        assert not isinstance(claimed, Overlapped)  # only a lock is ever overlapped
        return claimed

    def claim_locked(self, key: str, fields: dict[str, Any], lock: JobLock) -> Claim | Held | Overlapped:
        """See `Store.claim_locked`."""
        return self._claim(key, fields, lock)

    def _claim(self, key: str, fields: dict[str, Any], lock: JobLock | None) -> Claim | Held | Overlapped:
        attempt_id = uuid.uuid4().hex
        with self._lock:
            now = self._clock()
            lease = lease_fields(attempt_id, now, self._lease, self._retention)
            record = self._records.get(key)
            if record is not None:
                status = RunStatus(record["status"])
                if status is not RunStatus.IN_PROGRESS or record["lease_expires"] > now:
                    return held(key, status, record)
            if lock is not None:
                rival = self._rival(lock, key, now)
                if rival is not None:
                    return self._overlap(key, fields, record, lock, rival, now)
            if record is None:
                written = {key: {**fields, **lease, "attempts": 1}}
                attempt, reopened = 1, False
            else:
                attempt, reopened = int(record.get("attempts", 0)) + 1, HISTORY_FIELD in record
                taken = {**lease, "attempts": attempt, "previous_attempt_id": record.get("attempt_id")}
                written = {key: {**record, **taken}}
            if lock is not None:
                written[lock.id] = lock_record(key, lease, now)
            written_at = self._write_all(written)
            return Claim(
                key, attempt_id, attempt, written_at, reopened, lock.id if lock is not None else None
            )

    def take_lock(self, claim: Claim, lock: JobLock) -> Claim | Held | Overlapped:
        """See `Store.take_lock`."""
        with self._lock:
            now = self._clock()
            if not self._holds(claim):
                return Held(claim.key, RunStatus.IN_PROGRESS)
            record = self._records[claim.key]
            rival = self._rival(lock, claim.key, now)
            if rival is None:
                lease = {name: record[name] for name in ("attempt_id", "lease_expires", "expire_at")}
                taken = {**record, **_records.lock_taken_fields(now)}
                written_at = self._write_all({claim.key: taken, lock.id: lock_record(claim.key, lease, now)})
                return claim._replace(update_time=written_at, lock=lock.id)
            if lock.policy is Overlap.SKIP:
                return self._overlap(claim.key, {}, record, lock, rival, now)
            self._write(claim.key, {**record, **_records.released_fields(now)})
            return _records.overlapped(claim.key, lock, rival, self._records[lock.id])

    def _rival(self, lock: JobLock, key: str, now: datetime) -> str | None:
        """The run that holds the job lock against run `key`, or None if it is free (lock held)."""
        record = self._records.get(lock.id)
        rival = _records.lock_rival(record, key, now)
        if rival is None or record is None:
            return None
        return rival if _records.lock_held(record, self._records.get(rival), now) else None

    def _overlap(
        self,
        key: str,
        fields: dict[str, Any],
        record: dict[str, Any] | None,
        lock: JobLock,
        rival: str,
        now: datetime,
    ) -> Overlapped:
        """Run `key` meets the job lock `rival` holds: recorded skipped under `skip` (lock held)."""
        if lock.policy is Overlap.SKIP:
            if record is None:
                self._write(key, _records.skipped_record(fields, rival, now, self._retention))
            else:
                self._write(key, {**record, **_records.skipped_fields(rival, now, self._retention)})
        return _records.overlapped(key, lock, rival, self._records[lock.id])

    def exists(self, key: str) -> bool:
        """See `Store.exists`."""
        with self._lock:
            return key in self._records

    def complete(self, claim: Claim, stored: StoredResult, done: Done | None = None) -> StoredResult | None:
        """See `Store.complete`."""
        update = finish_fields(RunStatus.COMPLETED, stored.fields(), self._clock(), self._retention)
        extra = None
        if done is not None:
            entry = done_entry(done, claim.key, stored, update[EXPIRE_AT_FIELD])
            extra = {done_id(done.completions, done.order): entry}
        return stored if self._guarded(claim, update, RunStatus.COMPLETED, extra=extra) else None

    def previous(self, index: str, before: int) -> Previous | None:
        """See `Store.previous`."""
        after, last = done_id(index, before), done_id(index, 0)
        with self._lock:
            found = min((key for key in self._records if after < key <= last), default=None)
            return previous_of(None if found is None else copy.deepcopy(self._records[found]))

    def fail(self, claim: Claim, error: str) -> bool:
        """See `Store.fail`."""
        return self._finish(claim, RunStatus.FAILED, {"error": clip(error, MAX_ERROR_CHARS)})

    def release(self, claim: Claim) -> bool:
        """See `Store.release`. A record already gone counts as released, as in the ledger."""
        if claim.reopened:
            return self._guarded(claim, _records.released_fields(self._clock()), RunStatus.IN_PROGRESS)
        with self._lock:
            if self._holds(claim):
                self._free_lock(claim)
                del self._records[claim.key], self._written_at[claim.key]
                return True
            return claim.key not in self._records

    def hold(self, claim: Claim, seconds: float, reason: str) -> bool:
        """See `Store.hold`: the job lock the claim holds is held as long."""
        return self._guarded(
            claim, hold_fields(self._clock(), seconds, reason), RunStatus.IN_PROGRESS, keep=True
        )

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

    def note(self, key: str, fields: dict[str, Any]) -> None:
        """See `Store.note`."""
        with self._lock:
            self._write(key, {**fields, EXPIRE_AT_FIELD: self._clock() + self._retention})

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

    def _guarded(
        self,
        claim: Claim,
        update: dict[str, Any],
        status: RunStatus,
        keep: bool = False,
        extra: dict[str, dict[str, Any]] | None = None,
    ) -> bool:
        """Write `update` if `claim` still holds the run, and free the job lock it holds with it
        (`keep`: hold the lock as long as the new lease), and write the records of `extra` whole;
        else whether the record is already this attempt's with `status` (the answer the ledger
        gives when a write of its own landed)."""
        with self._lock:
            if not self._holds(claim):
                record = self._records.get(claim.key, {})
                return record.get("attempt_id") == claim.attempt_id and record.get("status") == status.value
            written = {**(extra or {}), claim.key: {**self._records[claim.key], **update}}
            if keep and claim.lock is not None and self._written_at.get(claim.lock) == claim.update_time:
                written[claim.lock] = {**self._records[claim.lock], "lease_expires": update["lease_expires"]}
            elif not keep:
                self._free_lock(claim)
            self._write_all(written)
            return True

    def _holds(self, claim: Claim) -> bool:
        """The fence: the record is exactly as this claim last wrote it (lock held)."""
        return self._written_at.get(claim.key) == claim.update_time

    def _free_lock(self, claim: Claim) -> None:
        """Delete the job lock `claim` holds, if it still does: written with the claim (lock held)."""
        if claim.lock is not None and self._written_at.get(claim.lock) == claim.update_time:
            del self._records[claim.lock], self._written_at[claim.lock]

    def _write(self, key: str, record: dict[str, Any]) -> datetime:
        """Store a copy of `record` under `key` (what the caller passed in stays the caller's); its
        new update time, later than every earlier one (lock held)."""
        return self._write_all({key: record})

    def _write_all(self, records: dict[str, dict[str, Any]]) -> datetime:
        """Store copies of `records` by key, as one commit: one new update time for all (lock held)."""
        written_at = max(datetime.now(UTC), self._last_write + _TICK)
        self._last_write = written_at
        for key, record in records.items():
            self._records[key] = copy.deepcopy(record)
            self._written_at[key] = written_at
        return written_at


def _claimed_since(record: dict[str, Any], since: datetime) -> bool:
    """Whether the record was last claimed at or after `since` (as a Firestore range filter, a
    record without the field never matches)."""
    return CLAIMED_AT_FIELD in record and record[CLAIMED_AT_FIELD] >= since
