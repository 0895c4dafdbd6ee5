"""The run ledger: one Firestore document per run, claimed under a lease, finished with fencing.

Happy path, two round trips: `create()` claims (fails if the document exists) and the finishing
write is guarded by the claim's update time, so only the attempt holding the claim can finish
or release it. A record that already exists costs one read; an expired lease is taken over with
an update guarded by the update time that read saw (optimistic, no transaction), so of several
contenders exactly one wins and the others are told the run is in progress.

Every store call carries a deadline (see `_budget`). A claim that gave up while its write was in
flight may still land later and would then hold the run for a whole lease, so the ledger looks
for it in the background for about a minute and deletes it if it finds it.

`LedgerStore` is the ledger as a `Store`: the same calls, with Google's exceptions translated.
Everything Firestore-specific (which exception means "unavailable", which "refused", which "your
setup is wrong") is decided there, once.
"""

from __future__ import annotations

import contextlib
import contextvars
import logging
import random
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, TypeVar

from google.api_core import exceptions as gexc
from google.api_core.retry import Retry, if_exception_type
from google.cloud import firestore
from google.cloud.firestore_v1.base_query import FieldFilter
from google.cloud.firestore_v1.field_path import FieldPath

from .. import _clock as clock
from .._logs import log
from .._text import MAX_ERROR_CHARS, clip, describe, type_name
from .._version import __version__
from ..contract import CLAIMED_AT_FIELD, EXPIRE_AT_FIELD, HISTORY_FIELD, VERSION_FIELD, Overlap, RunStatus
from ..core.errors import StoreDenied, StoreRejected, StoreUnavailable
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
from ._budget import Budget
from ._commit import Write, Writes
from ._records import (
    finish_fields,
    held,
    hold_fields,
    lease_fields,
    lock_record,
    release_decision,
)

if TYPE_CHECKING:
    from ..core.requests import RerunRequest

_T = TypeVar("_T")

# Transient store errors: a finishing write is retried on these, so a job that succeeded is not
# run again because its completion write hiccuped.
TRANSIENT = (
    gexc.ServiceUnavailable,
    gexc.DeadlineExceeded,
    gexc.InternalServerError,
    gexc.ResourceExhausted,
    gexc.Aborted,
    gexc.Unknown,
)
FINISH_RETRY = Retry(predicate=if_exception_type(*TRANSIENT), initial=0.05, maximum=2.0, multiplier=2.0)
# A claim gives up sooner: nothing has run yet, and Scheduler will deliver the run again.
CLAIM_RETRY = Retry(predicate=if_exception_type(*TRANSIENT), initial=0.05, maximum=1.0, multiplier=2.0)
_CLAIM_ATTEMPTS = 3

# Seconds all the store calls of one operation may take together (retries included).
CLAIM_SECONDS = 10.0
FINISH_SECONDS = 30.0
RELEASE_SECONDS = 10.0
# Seconds between the background looks for a claim that may land after its attempt gave up
# (about a minute in all); the client's deadline makes a later landing implausible.
ABANDONED_CLAIM_CHECKS = (0.0, 1.0, 2.0, 4.0, 8.0, 16.0, 32.0)
# Records read per batched read (an operator's listing), so each read ends well within its deadline.
READ_BATCH = 300


class Ledger:
    """Claim, complete, fail and release runs by key in one Firestore collection."""

    def __init__(
        self,
        client: firestore.Client,
        collection: str,
        lease: timedelta,
        retention: timedelta,
        finish_retry: Retry = FINISH_RETRY,
        claim_retry: Retry = CLAIM_RETRY,
    ):
        self._client = client
        self._collection = client.collection(collection)
        self._lease = lease
        self._retention = retention
        self._finish_retry = finish_retry
        self._claim_retry = claim_retry
        self._writes = Writes(client)  # the claim and the finishing write: see `_commit`

    def exists(self, key: str) -> bool:
        """Whether the run has a record, in any state."""
        budget = Budget(CLAIM_SECONDS, self._claim_retry)
        return bool(self._collection.document(key).get(**budget.call()).exists)

    def claim(self, key: str, fields: dict[str, Any]) -> Claim | Held:
        """Claim the run for a new attempt, or say who holds it.

        `fields` (job, schedule time, ...) are stored with the claim for operators. Contention is
        never an error: a lost race is reported as Held(IN_PROGRESS), which callers answer 409.
        Store errors other than contention propagate, after `CLAIM_SECONDS` at most.
        """
        claimed = self._claiming(key, fields, None)
        assert not isinstance(claimed, Overlapped)  # only a lock is ever overlapped
        return claimed

    def claim_locked(self, key: str, fields: dict[str, Any], lock: JobLock) -> Claim | Held | Overlapped:
        """`claim` with the job's lock (see `Store.claim_locked`): the run and the lock are created
        in one commit, so the happy path costs what a claim without it costs, one round trip."""
        return self._claiming(key, fields, lock)

    def _claiming(self, key: str, fields: dict[str, Any], lock: JobLock | None) -> Claim | Held | Overlapped:
        attempt_id = uuid.uuid4().hex
        sent: list[bool] = []
        try:
            return self._claim(key, fields, lock, attempt_id, Budget(CLAIM_SECONDS, self._claim_retry), sent)
        except Exception:
            if sent:  # a write of ours may land after we gave up: do not let it hold the run
                self._remove_later(key, attempt_id, lock.id if lock is not None else None)
            raise

    def _claim(
        self,
        key: str,
        fields: dict[str, Any],
        lock: JobLock | None,
        attempt_id: str,
        budget: Budget,
        sent: list[bool],
    ) -> Claim | Held | Overlapped:
        doc = self._collection.document(key)
        lock_doc = self._collection.document(lock.id) if lock is not None else None
        for _ in range(_CLAIM_ATTEMPTS):
            now = clock.now()
            lease = lease_fields(attempt_id, now, self._lease, self._retention)
            claimed = {**fields, **lease, "attempts": 1}
            try:
                sent.append(True)
                if lock_doc is None:
                    return Claim(key, attempt_id, 1, self._writes.create(doc, claimed, **budget.call()))
                writes = [Write(doc, claimed), Write(lock_doc, lock_record(key, lease, now))]
                return Claim(
                    key, attempt_id, 1, self._writes.commit(writes, **budget.call()), lock=lock_doc.id
                )
            except gexc.AlreadyExists:
                pass
            except gexc.Aborted:
                return Held(key, RunStatus.IN_PROGRESS)
            snapshot, locked = self._read(doc, lock_doc, budget)
            record = (snapshot.to_dict() or {}) if snapshot.exists else None
            if record is not None and record.get("attempt_id") == attempt_id:
                # Our own create landed; only its answer was lost and the retry hit our record.
                ours = lock_doc.id if lock_doc is not None else None
                return Claim(key, attempt_id, int(record.get("attempts", 1)), snapshot.update_time, lock=ours)
            if record is not None:
                status = RunStatus(record["status"])
                if status is not RunStatus.IN_PROGRESS or record["lease_expires"] > now:
                    return held(key, status, record)
            if lock is None:
                if record is None:
                    continue  # released between our create and our read: try to create again
                return self._take_over(doc, snapshot.update_time, record, lease, budget)
            lock_data = (locked.to_dict() or {}) if locked.exists else None
            rival = self._rival(lock_data, key, now, budget)
            if rival is not None:
                assert lock_data is not None
                answer = self._overlap(doc, snapshot, fields, lock, rival, lock_data, now, budget)
                if answer is not None:
                    return answer
                continue  # the run was written meanwhile: look again
            if record is None and lock_data is None:
                continue  # both released between our create and our read: try to create again
            taken = self._lock_taken(doc, snapshot, record, locked, lock, lease, claimed, budget)
            if taken is not None:
                return taken
        return Held(key, RunStatus.IN_PROGRESS)

    def _read(self, doc, lock_doc, budget: Budget) -> tuple[Any, Any]:
        """The run's snapshot, and the job lock's (None without one): both in one round trip."""
        if lock_doc is None:
            return doc.get(**budget.call()), None
        found = {snapshot.id: snapshot for snapshot in self._client.get_all([doc, lock_doc], **budget.call())}
        return found[doc.id], found[lock_doc.id]

    def _rival(self, lock: dict[str, Any] | None, key: str, now: datetime, budget: Budget) -> str | None:
        """The run that holds the job lock `lock` against run `key` (one more read: its record),
        or None if the lock is free."""
        rival = _records.lock_rival(lock, key, now)
        if rival is None or lock is None:
            return None
        holder = self._collection.document(rival).get(**budget.call())
        return rival if _records.lock_held(lock, holder.to_dict() if holder.exists else None, now) else None

    def _overlap(
        self,
        doc,
        snapshot,
        fields: dict[str, Any],
        lock: JobLock,
        rival: str,
        lock_data: dict[str, Any],
        now: datetime,
        budget: Budget,
    ) -> Overlapped | None:
        """Run `doc` meets the job lock `rival` holds: recorded skipped under `skip` (created, or
        its record's expired claim overwritten, guarded); None if the run was written meanwhile."""
        if lock.policy is Overlap.SKIP:
            try:
                if not snapshot.exists:
                    skipped = _records.skipped_record(fields, rival, now, self._retention)
                    self._writes.create(doc, skipped, **budget.call())
                else:
                    skipped = _records.skipped_fields(rival, now, self._retention)
                    self._writes.update(doc, skipped, snapshot.update_time, **budget.call())
            except (gexc.AlreadyExists, gexc.FailedPrecondition, gexc.NotFound, gexc.Aborted):
                return None
        return _records.overlapped(doc.id, lock, rival, lock_data)

    def _lock_taken(
        self,
        doc,
        snapshot,
        record: dict[str, Any] | None,
        locked,
        lock: JobLock,
        lease: dict[str, Any],
        claimed: dict[str, Any],
        budget: Budget,
    ) -> Claim | None:
        """Claim run `doc` (new, or its holder's lease expired) with the free job lock `locked`,
        both guarded by what was read; None if either was written meanwhile."""
        attempt = 1 if record is None else int(record.get("attempts", 0)) + 1
        if record is None:
            run = Write(doc, claimed)
        else:
            taken = {**lease, "attempts": attempt, "previous_attempt_id": record.get("attempt_id")}
            run = Write(doc, taken, snapshot.update_time)
        reopened = record is not None and HISTORY_FIELD in record
        new_lock = lock_record(doc.id, lease, lease[CLAIMED_AT_FIELD])
        held_lock = Write(locked.reference, new_lock, locked.update_time if locked.exists else None)
        try:
            written_at = self._writes.commit([run, held_lock], **budget.call())
        except (gexc.AlreadyExists, gexc.FailedPrecondition, gexc.NotFound, gexc.Aborted):
            now = doc.get(**budget.call())
            if (now.to_dict() or {}).get("attempt_id") == lease["attempt_id"]:
                # Ours; only its answer was lost.
                return Claim(doc.id, lease["attempt_id"], attempt, now.update_time, reopened, lock.id)
            return None  # the run or the lock was written meanwhile: the caller looks again
        return Claim(doc.id, lease["attempt_id"], attempt, written_at, reopened, lock.id)

    def _take_over(
        self, doc, read_at: datetime, record: dict[str, Any], lease: dict[str, Any], budget: Budget
    ) -> Claim | Held:
        """Claim a run whose holder's lease expired, unless someone wrote to it since we read it."""
        attempt = int(record.get("attempts", 0)) + 1
        reopened = HISTORY_FIELD in record
        try:
            written = doc.update(
                {**lease, "attempts": attempt, "previous_attempt_id": record.get("attempt_id")},
                option=self._client.write_option(last_update_time=read_at),
                **budget.call(),
            )
        except (gexc.FailedPrecondition, gexc.NotFound, gexc.Aborted):
            now = doc.get(**budget.call())
            if not now.exists or now.get("attempt_id") != lease["attempt_id"]:
                return Held(doc.id, RunStatus.IN_PROGRESS)  # another delivery took it over first
            # Ours; only its answer was lost.
            return Claim(doc.id, lease["attempt_id"], attempt, now.update_time, reopened)
        return Claim(doc.id, lease["attempt_id"], attempt, written.update_time, reopened)

    def take_lock(self, claim: Claim, lock: JobLock) -> Claim | Held | Overlapped:
        """See `Store.take_lock`: the lock read with the run (and its holder's record if it is
        live), then one commit."""
        budget = Budget(CLAIM_SECONDS, self._claim_retry)
        doc, lock_doc = self._collection.document(claim.key), self._collection.document(lock.id)
        sent = False  # a commit of this call was sent: the record may hold its own write
        for _ in range(_CLAIM_ATTEMPTS):
            now = clock.now()
            snapshot, locked = self._read(doc, lock_doc, budget)
            record = (snapshot.to_dict() or {}) if snapshot.exists else {}
            lock_data = (locked.to_dict() or {}) if locked.exists else None
            if sent and record.get("attempt_id") == claim.attempt_id:
                # An earlier try of this call landed; only its answer was lost.
                together = locked.exists and locked.update_time == snapshot.update_time
                again = _records.sent_again(record, lock_data, claim.attempt_id, together, now)
                if again is True:
                    return claim._replace(update_time=snapshot.update_time, lock=lock.id)
                if isinstance(again, str):
                    return _records.overlapped(claim.key, lock, again, lock_data or {})
            if (
                not snapshot.exists
                or snapshot.update_time != claim.update_time
                or record.get("status") != RunStatus.IN_PROGRESS.value
            ):
                return Held(claim.key, RunStatus.IN_PROGRESS)  # the fence: this claim no longer holds it
            rival = self._rival(lock_data, claim.key, now, budget)
            sent = True
            try:
                if rival is None:
                    lease = {name: record[name] for name in ("attempt_id", "lease_expires", EXPIRE_AT_FIELD)}
                    writes = [
                        Write(doc, _records.lock_taken_fields(now), claim.update_time),
                        Write(
                            lock_doc,
                            lock_record(claim.key, lease, now),
                            locked.update_time if locked.exists else None,
                        ),
                    ]
                    written_at = self._writes.commit(writes, **budget.call())
                    return claim._replace(update_time=written_at, lock=lock.id)
                assert lock_data is not None
                if lock.policy is Overlap.SKIP:
                    skipped = _records.skipped_fields(rival, now, self._retention)
                else:
                    skipped = _records.released_fields(now)
                self._writes.update(doc, skipped, claim.update_time, **budget.call())
                return _records.overlapped(claim.key, lock, rival, lock_data)
            except (gexc.AlreadyExists, gexc.FailedPrecondition, gexc.NotFound, gexc.Aborted):
                continue  # the lock (or the run) was written meanwhile: look again
        return Held(claim.key, RunStatus.IN_PROGRESS)

    def complete(self, claim: Claim, result: Any = None) -> bool:
        """Record success. False if this attempt no longer holds the claim (nothing is written)."""
        stored = result if isinstance(result, StoredResult) else StoredResult.of(result)
        return self.record_result(claim, stored) is not None

    def record_result(
        self, claim: Claim, stored: StoredResult, done: Done | None = None
    ) -> StoredResult | None:
        """Record success with `stored` (and with `done`, its job's completions entry in the same
        commit); the result as recorded, or None if the claim was lost.

        Should the store refuse the result, the completion is recorded without it: a finished job
        always ends `completed`.
        """
        budget = Budget(FINISH_SECONDS, self._finish_retry)
        try:
            return stored if self._complete(claim, stored, done, budget) else None
        except gexc.InvalidArgument as exc:
            if stored.text is None:
                raise
            stored = StoredResult.not_stored(f"the store refused it: {describe(exc, 300)}")
            return stored if self._complete(claim, stored, done, budget) else None

    def _complete(self, claim: Claim, stored: StoredResult, done: Done | None, budget: Budget) -> bool:
        update = finish_fields(RunStatus.COMPLETED, stored.fields(), clock.now(), self._retention)
        extra = []
        if done is not None:
            entry = done_entry(done, claim.key, stored, update[EXPIRE_AT_FIELD])
            entry_doc = self._collection.document(done_id(done.completions, done.order))
            extra.append(Write(entry_doc, entry, replace=True))
        return self._guarded(claim, update, RunStatus.COMPLETED, budget, extra=extra)

    def previous(self, index: str, before: int) -> Previous | None:
        """See `Store.previous`: one query on document ids, which needs no composite index."""
        ids, docs = FieldPath.document_id(), self._collection.document
        query = (
            self._collection.where(filter=FieldFilter(ids, ">", docs(done_id(index, before))))
            .where(filter=FieldFilter(ids, "<=", docs(done_id(index, 0))))
            .order_by(ids)
            .limit(1)
        )
        found = list(query.stream(timeout=CLAIM_SECONDS))
        return previous_of(found[0].to_dict() if found else None)

    def fail(self, claim: Claim, error: str) -> bool:
        """Record a permanent failure: later deliveries are answered without running the job."""
        budget = Budget(FINISH_SECONDS, self._finish_retry)
        return self._finish(claim, RunStatus.FAILED, {"error": clip(error, MAX_ERROR_CHARS)}, budget)

    def release(self, claim: Claim) -> bool:
        """Delete the claim so a retry runs the job at once (a reopened run's: end its lease, so its
        history stays), and the job lock it holds. False if this attempt lost the claim."""
        budget = Budget(RELEASE_SECONDS, self._finish_retry)
        if claim.reopened:
            return self._guarded(claim, _records.released_fields(clock.now()), RunStatus.IN_PROGRESS, budget)
        doc = self._collection.document(claim.key)
        try:
            if claim.lock is None or not self._with_lock(
                claim, Write(doc, None, claim.update_time), None, budget
            ):
                doc.delete(
                    option=self._client.write_option(last_update_time=claim.update_time), **budget.call()
                )
            return True
        except (gexc.FailedPrecondition, gexc.NotFound):
            # Lost: another attempt took the run over; or an earlier try of ours deleted it and
            # only its answer was lost, which the record's absence tells.
            return not doc.get(**budget.call()).exists

    def hold(self, claim: Claim, seconds: float, reason: str) -> bool:
        """Keep the claim in progress until `seconds` from now (its lease), with `held_at` and
        `held_reason`, and the job lock it holds as long. False if this attempt no longer holds the
        claim (nothing is written)."""
        budget = Budget(RELEASE_SECONDS, self._finish_retry)
        update = hold_fields(clock.now(), seconds, reason)
        return self._guarded(
            claim, update, RunStatus.IN_PROGRESS, budget, {"lease_expires": update["lease_expires"]}
        )

    def get(self, key: str) -> dict[str, Any] | None:
        """The stored record of a run, or None."""
        snapshot = self._collection.document(key).get(**Budget(CLAIM_SECONDS, self._claim_retry).call())
        return snapshot.to_dict() if snapshot.exists else None

    def annotate(self, key: str, fields: dict[str, Any]) -> None:
        """Add `fields` to a finished run's record (nothing takes a finished run over, so no guard)."""
        budget = Budget(FINISH_SECONDS, self._finish_retry)
        self._collection.document(key).update(fields, **budget.call())

    def note(self, key: str, fields: dict[str, Any]) -> None:
        """Write the note `key` (see `Store.note`), replacing what it held."""
        budget = Budget(FINISH_SECONDS, self._finish_retry)
        expires = {EXPIRE_AT_FIELD: clock.now() + self._retention, VERSION_FIELD: __version__}
        self._collection.document(key).set({**fields, **expires}, **budget.call())

    def get_many(self, keys: Sequence[str]) -> dict[str, dict[str, Any]]:
        """The stored records of those of `keys` that have one, by key: batched reads of
        `READ_BATCH` keys, each with its own deadline."""
        found: dict[str, dict[str, Any]] = {}
        for first in range(0, len(keys), READ_BATCH):
            refs = [self._collection.document(key) for key in keys[first : first + READ_BATCH]]
            budget = Budget(FINISH_SECONDS, self._claim_retry)
            found.update(
                (snapshot.id, snapshot.to_dict() or {})
                for snapshot in self._client.get_all(refs, **budget.call())
                if snapshot.exists
            )
        return found

    def find(
        self, equal: Mapping[str, Any], claimed_since: datetime | None = None
    ) -> dict[str, dict[str, Any]]:
        """The records whose fields equal `equal`, last claimed at or after `claimed_since`.

        Equality filters alone are served by Firestore's single-field indexes; with `claimed_since`
        the query needs a composite index on the equality fields and `claimed_at` (the stack
        creates the one the operators' `runonce runs` uses: docs/operate.md).
        """
        query: Any = self._collection
        for name, value in equal.items():
            query = query.where(filter=FieldFilter(name, "==", value))
        if claimed_since is not None:
            query = query.where(filter=FieldFilter(CLAIMED_AT_FIELD, ">=", claimed_since))
        budget = Budget(FINISH_SECONDS, self._claim_retry)
        return {snapshot.id: snapshot.to_dict() or {} for snapshot in query.stream(**budget.call())}

    def amend(self, key: str, decide: Decision) -> dict[str, Any] | Refusal:
        """Read the record and write what `decide` returns in one transaction (see `Store.amend`).

        Firestore retries the transaction on contention, asking `decide` again with the record as
        it is then; a write by anyone between the read and the commit makes the commit fail.
        """
        doc = self._collection.document(key)
        budget = Budget(FINISH_SECONDS, self._finish_retry)

        @firestore.transactional
        def change(transaction: Any) -> dict[str, Any] | Refusal:
            snapshot = doc.get(transaction=transaction, **budget.call())
            record = (snapshot.to_dict() or {}) if snapshot.exists else None
            decided = decide(None if record is None else dict(record))
            if isinstance(decided, Refusal):
                return decided
            if record is None:
                transaction.create(doc, dict(decided))
            else:
                transaction.update(doc, dict(decided))
            return {**(record or {}), **decided}

        return _contended(lambda: change(self._client.transaction()))

    def release_held(
        self, key: str, attempt_id: str, action: Mapping[str, Any], force: bool = False
    ) -> dict[str, Any] | Refusal:
        """See `Store.release_held`."""
        return self.amend(key, release_decision(attempt_id, action, force, clock.now()))

    def remove_if_ours(self, key: str, attempt_id: str, lock: str | None = None) -> bool | None:
        """Delete the run's record if it is still `attempt_id`'s claim, in progress, with the job
        lock `lock` if that claim holds it.

        True: deleted; False: the record is not (or no longer) that claim; None: no record (yet).
        """
        budget = Budget(RELEASE_SECONDS, self._claim_retry)
        doc = self._collection.document(key)
        snapshot = doc.get(**budget.call())
        if not snapshot.exists:
            return None
        record = snapshot.to_dict() or {}
        if record.get("attempt_id") != attempt_id or record.get("status") != RunStatus.IN_PROGRESS.value:
            return False
        claim = Claim(key, attempt_id, int(record.get("attempts", 1)), snapshot.update_time, lock=lock)
        guard = self._client.write_option(last_update_time=snapshot.update_time)
        try:
            if lock is None or not self._with_lock(
                claim, Write(doc, None, snapshot.update_time), None, budget
            ):
                doc.delete(option=guard, **budget.call())
        except (gexc.FailedPrecondition, gexc.NotFound):
            return False
        return True

    def _remove_later(self, key: str, attempt_id: str, lock: str | None) -> None:
        """Look for a claim of `attempt_id` that lands late, in the background, and delete it."""
        context = contextvars.copy_context()  # keeps the request's log fields (run key, job, trace)
        threading.Thread(
            target=context.run, args=(self._remove_late_claim, key, attempt_id, lock), daemon=True
        ).start()

    def _remove_late_claim(self, key: str, attempt_id: str, lock: str | None) -> None:
        for wait in ABANDONED_CLAIM_CHECKS:
            time.sleep(wait)
            try:
                removed = self.remove_if_ours(key, attempt_id, lock)
            except Exception:
                continue  # the store is still unavailable: look again later
            if removed:
                log(
                    logging.WARNING,
                    "deleted a claim that landed after its attempt had answered store_unavailable, "
                    "so the run's retries need not wait for its lease",
                    attempt_id=attempt_id,
                )
            if removed is not None:
                return

    # The re-run verbs (docs/rerun.md): each decision is one Firestore transaction. Filing and
    # withdrawing a request are the operators' alone: their module loads at the first use.

    def request_rerun(
        self, slot: str, key: str, fields: dict[str, Any], insist: bool, ttl: timedelta
    ) -> RerunRequest:
        """See `Store.request_rerun`."""
        from . import _requests

        slot_doc, run_doc = self._collection.document(slot), self._collection.document(key)
        request_id = uuid.uuid4().hex

        @firestore.transactional
        def write(transaction) -> dict[str, Any]:
            now = clock.now()
            record, request = _read(run_doc, transaction), _read(slot_doc, transaction)
            _requests.refuse(key, record, request, insist, now, fields)
            written = _requests.request_record(request_id, key, fields, now, ttl, self._retention)
            transaction.set(slot_doc, written)
            return written

        return _requests.request_of(slot, _contended(lambda: write(self._client.transaction())))

    def withdraw_rerun(self, slot: str, request_id: str) -> bool:
        """See `Store.withdraw_rerun`."""
        from . import _requests

        slot_doc = self._collection.document(slot)

        @firestore.transactional
        def withdraw(transaction) -> bool:
            if not _requests.withdrawable(_read(slot_doc, transaction), request_id):
                return False
            transaction.update(slot_doc, _requests.withdrawn_fields(clock.now()))
            return True

        return bool(_contended(lambda: withdraw(self._client.transaction())))

    def take_rerun(self, slot: str, key: str, fields: dict[str, Any]) -> Rerun | None:
        """See `Store.take_rerun`. One read of both records decides the usual case (no request
        pending); only a pending request costs a transaction, and the claim's fencing token one
        read after it."""
        budget = Budget(CLAIM_SECONDS, self._claim_retry)
        delivery_doc, slot_doc = self._collection.document(key), self._collection.document(slot)
        found = {
            snapshot.id: snapshot.to_dict() or {}
            for snapshot in self._client.get_all([delivery_doc, slot_doc], **budget.call())
            if snapshot.exists
        }
        if not _records.may_consume(found.get(key), found.get(slot), clock.now()):
            return _records.told_rerun(found[key]) if key in found else None
        attempt_id = uuid.uuid4().hex

        @firestore.transactional
        def consume(transaction) -> Rerun | dict[str, Any] | None:
            now = clock.now()
            delivered, request = _read(delivery_doc, transaction), _read(slot_doc, transaction)
            told = _records.told_rerun(delivered) if delivered is not None else None
            if not _records.may_consume(delivered, request, now):
                return told
            assert request is not None
            if told is not None and not _records.finished(
                _read(self._collection.document(told.key), transaction)
            ):
                return told  # the run it carried may still need this very delivery (a retry)
            run_doc = self._collection.document(request["rerun_key"])
            target = _read(run_doc, transaction)
            if not _records.takeable(target, request, now):
                transaction.update(slot_doc, _records.void_fields(now, key))
                return told
            lease = lease_fields(attempt_id, now, self._lease, self._retention)
            transaction.set(run_doc, _records.taken_record(target, request, lease, fields, key, now))
            marker = _records.marker_record(fields, request, now, self._retention, delivered)
            (transaction.create if delivered is None else transaction.set)(delivery_doc, marker)
            transaction.update(slot_doc, _records.consumed_fields(now, key))
            return request

        consumed = _contended(lambda: consume(self._client.transaction()))
        if not isinstance(consumed, dict):
            return consumed
        # The commit's update time is the claim's fencing token; the record tells it (and that the
        # claim is still ours: nothing takes over a live lease).
        snapshot = self._collection.document(consumed["rerun_key"]).get(**budget.call())
        record = snapshot.to_dict() or {}
        if record.get("attempt_id") != attempt_id:
            return _records.consumed_rerun(consumed)
        return _records.rerun_claim(consumed, record, snapshot.update_time)

    def _finish(self, claim: Claim, status: RunStatus, fields: dict[str, Any], budget: Budget) -> bool:
        update = finish_fields(status, fields, clock.now(), self._retention)
        return self._guarded(claim, update, status, budget)

    def _guarded(
        self,
        claim: Claim,
        update: dict[str, Any],
        status: RunStatus,
        budget: Budget,
        lock_update: dict[str, Any] | None = None,
        extra: Sequence[Write] = (),
    ) -> bool:
        """Write `update` if this attempt still holds the claim, and in the same commit free the job
        lock the claim holds (or write `lock_update` on it) and make the `extra` writes; whether
        the record is now this attempt's, with `status`."""
        doc = self._collection.document(claim.key)
        try:
            run = Write(doc, update, claim.update_time)
            if claim.lock is None or not self._with_lock(claim, run, lock_update, budget, extra):
                self._writes.apply([run, *extra], **budget.call())
            return True
        except (gexc.FailedPrecondition, gexc.NotFound):
            # Either another attempt took the run over, or an earlier try of this very write
            # committed and only its answer was lost: the record tells which.
            snapshot = doc.get(**budget.call())
            record = (snapshot.to_dict() or {}) if snapshot.exists else {}
            return record.get("attempt_id") == claim.attempt_id and record.get("status") == status.value

    def _with_lock(
        self,
        claim: Claim,
        run: Write,
        lock_update: dict[str, Any] | None,
        budget: Budget,
        extra: Sequence[Write] = (),
    ) -> bool:
        """Commit `run` with the job lock's deletion (or `lock_update`), both guarded by the claim's
        fence; False, with nothing written, if either guard failed: the caller then writes `run`
        alone, which tells whether the run is still this attempt's (the lock may have been freed
        or taken by another run meanwhile, and then it is not the claim's to touch)."""
        assert claim.lock is not None
        lock = Write(self._collection.document(claim.lock), lock_update, claim.update_time)
        try:
            self._writes.apply([run, lock, *extra], **budget.call())
        except (gexc.FailedPrecondition, gexc.NotFound):
            return False
        return True


def _read(doc, transaction) -> dict[str, Any] | None:
    """A document read in `transaction` (its data, or None)."""
    snapshot = doc.get(transaction=transaction, timeout=CLAIM_SECONDS)
    return (snapshot.to_dict() or {}) if snapshot.exists else None


# The store refused the function's identity, or the database does not exist.
_DENIED = (gexc.PermissionDenied, gexc.Unauthenticated, gexc.NotFound)


def _problem(exc: Exception) -> str:
    """What went wrong with a Firestore call, named for what it was."""
    if isinstance(exc, (gexc.RetryError, *TRANSIENT)):
        return f"the store was unavailable ({type_name(exc)}: {describe(exc, 500)})"
    return f"the store rejected it ({type_name(exc)}: {describe(exc, 500)})"


CONTENDED_TRIES = 6
"""Fresh transactions tried, after the client's own retries, when one keeps losing to another."""
CONTENDED_PAUSE_SECONDS = 0.05
"""The first pause before a fresh transaction; each later one may be twice as long (full jitter)."""


def _contended(run: Callable[[], _T]) -> _T:
    """`run()`, a transaction, tried again in a fresh transaction after a random pause when the
    client gave up on contention. The client retries an aborted commit at once, in its place in
    line; two transactions racing for one record can still abort each other every time (the
    emulator's locks do, `tests/store/test_conformance_rerun.py`'s races showed it), and a pause
    of random length lets one of them win. StoreUnavailable when none does."""
    for attempt in range(CONTENDED_TRIES):
        try:
            return run()
        except ValueError as exc:  # the client's "Failed to commit transaction in N attempts."
            if not isinstance(exc.__cause__, gexc.Aborted):
                raise
            last = exc
        except gexc.InvalidArgument as exc:
            if "transaction is invalid or closed" not in str(exc).lower():
                raise
            # The client sent the commit again after losing its answer; the first may have landed.
            raise StoreUnavailable(
                f"the transaction's outcome is unknown ({describe(exc, 300)}): its commit's answer was "
                "lost and the store had closed it when it was sent again; read the record before "
                "trying again"
            ) from exc
        time.sleep(random.uniform(0, CONTENDED_PAUSE_SECONDS * 2**attempt))
    raise StoreUnavailable(f"the transaction kept losing to others: {describe(last, 300)}") from last


@contextlib.contextmanager
def _translated() -> Iterator[None]:
    try:
        yield
    except (gexc.RetryError, *TRANSIENT) as exc:
        raise StoreUnavailable(_problem(exc)) from exc
    except _DENIED as exc:
        raise StoreDenied(
            f"{_problem(exc)}; check that the Firestore database (RUNONCE_DATABASE) exists and that the "
            "function's service account may use it (roles/datastore.user)"
        ) from exc
    except gexc.GoogleAPICallError as exc:
        raise StoreRejected(_problem(exc)) from exc


class LedgerStore:
    """A `Store` backed by a Firestore `Ledger`."""

    def __init__(self, ledger: Ledger):
        self.ledger = ledger

    def claim(self, key: str, fields: dict[str, Any]) -> Claim | Held:
        """See `Store.claim`."""
        with _translated():
            return self.ledger.claim(key, fields)

    def claim_locked(self, key: str, fields: dict[str, Any], lock: JobLock) -> Claim | Held | Overlapped:
        """See `Store.claim_locked`."""
        with _translated():
            return self.ledger.claim_locked(key, fields, lock)

    def take_lock(self, claim: Claim, lock: JobLock) -> Claim | Held | Overlapped:
        """See `Store.take_lock`."""
        with _translated():
            return self.ledger.take_lock(claim, lock)

    def exists(self, key: str) -> bool:
        """See `Store.exists`."""
        with _translated():
            return self.ledger.exists(key)

    def complete(self, claim: Claim, stored: StoredResult, done: Done | None = None) -> StoredResult | None:
        """See `Store.complete`."""
        with _translated():
            return self.ledger.record_result(claim, stored, done)

    def previous(self, index: str, before: int) -> Previous | None:
        """See `Store.previous`."""
        with _translated():
            return self.ledger.previous(index, before)

    def fail(self, claim: Claim, error: str) -> bool:
        """See `Store.fail`."""
        with _translated():
            return self.ledger.fail(claim, error)

    def release(self, claim: Claim) -> bool:
        """See `Store.release`."""
        with _translated():
            return self.ledger.release(claim)

    def hold(self, claim: Claim, seconds: float, reason: str) -> bool:
        """See `Store.hold`."""
        with _translated():
            return self.ledger.hold(claim, seconds, reason)

    def read(self, key: str) -> dict[str, Any] | None:
        """See `Store.read`."""
        with _translated():
            return self.ledger.get(key)

    def annotate(self, key: str, fields: dict[str, Any]) -> None:
        """See `Store.annotate`."""
        with _translated():
            self.ledger.annotate(key, fields)

    def note(self, key: str, fields: dict[str, Any]) -> None:
        """See `Store.note`."""
        with _translated():
            self.ledger.note(key, fields)

    def request_rerun(
        self, slot: str, key: str, fields: dict[str, Any], insist: bool, ttl: timedelta
    ) -> RerunRequest:
        """See `Store.request_rerun`."""
        with _translated():
            return self.ledger.request_rerun(slot, key, fields, insist, ttl)

    def withdraw_rerun(self, slot: str, request_id: str) -> bool:
        """See `Store.withdraw_rerun`."""
        with _translated():
            return self.ledger.withdraw_rerun(slot, request_id)

    def take_rerun(self, slot: str, key: str, fields: dict[str, Any]) -> Rerun | None:
        """See `Store.take_rerun`."""
        with _translated():
            return self.ledger.take_rerun(slot, key, fields)

    def read_many(self, keys: Sequence[str]) -> dict[str, dict[str, Any]]:
        """See `Store.read_many`."""
        with _translated():
            return self.ledger.get_many(keys)

    def find(
        self, equal: Mapping[str, Any], claimed_since: datetime | None = None
    ) -> dict[str, dict[str, Any]]:
        """See `Store.find`."""
        with _translated():
            return self.ledger.find(equal, claimed_since)

    def amend(self, key: str, decide: Decision) -> dict[str, Any] | Refusal:
        """See `Store.amend`."""
        with _translated():
            return self.ledger.amend(key, decide)

    def release_held(
        self, key: str, attempt_id: str, action: Mapping[str, Any], force: bool = False
    ) -> dict[str, Any] | Refusal:
        """See `Store.release_held`."""
        with _translated():
            return self.ledger.release_held(key, attempt_id, action, force)
