"""The run ledger: one Firestore document per run, claimed under a lease, finished with fencing.

Happy path, two round trips: `create()` claims (fails if the document exists) and the finishing
write is guarded by the claim's update time, so only the attempt holding the claim can finish
or release it. A record that already exists costs one read; an expired lease is taken over with
an update guarded by the update time that read saw (optimistic, no transaction), so of several
contenders exactly one wins and the others are told the run is in progress.
"""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass
from datetime import datetime, timedelta
from enum import Enum
from typing import Any

from google.api_core import exceptions as gexc
from google.api_core.retry import Retry, if_exception_type
from google.cloud import firestore

from . import clock

# Results larger than this are not stored (Firestore documents are limited to 1 MiB).
MAX_RESULT_BYTES = 16 * 1024

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
FINISH_RETRY = Retry(
    predicate=if_exception_type(*TRANSIENT), initial=0.05, maximum=2.0, multiplier=2.0, timeout=30.0
)
# A claim gives up sooner: nothing has run yet, and Scheduler will deliver the run again.
CLAIM_RETRY = Retry(
    predicate=if_exception_type(*TRANSIENT), initial=0.05, maximum=1.0, multiplier=2.0, timeout=10.0
)
_CLAIM_ATTEMPTS = 3


class RunStatus(str, Enum):
    """Where a run stands in the ledger."""

    IN_PROGRESS = "in_progress"
    COMPLETED = "completed"
    FAILED = "failed"


@dataclass(frozen=True)
class Claim:
    """This attempt holds the run: it may execute the job, then finish or release the claim."""

    key: str
    attempt_id: str
    attempt: int
    update_time: datetime


@dataclass(frozen=True)
class Held:
    """The run is not this attempt's to execute: finished already, or another attempt holds it."""

    key: str
    status: RunStatus
    result: Any = None
    error: str | None = None
    lease_expires: datetime | None = None


def storable(result: Any) -> Any:
    """The job's result if it is small JSON-like data Firestore can hold, else None."""
    try:
        encoded = json.dumps(result)
    except (TypeError, ValueError):
        return None
    return result if len(encoded.encode("utf-8")) <= MAX_RESULT_BYTES else None


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

    def claim(self, key: str, fields: dict[str, Any]) -> Claim | Held:
        """Claim the run for a new attempt, or say who holds it.

        `fields` (job, schedule time, ...) are stored with the claim for operators. Contention is
        never an error: a lost race is reported as Held(IN_PROGRESS), which callers answer 409.
        Store errors other than contention propagate.
        """
        doc = self._collection.document(key)
        for _ in range(_CLAIM_ATTEMPTS):
            now = clock.now()
            attempt_id = uuid.uuid4().hex
            lease = {
                "status": RunStatus.IN_PROGRESS.value,
                "attempt_id": attempt_id,
                "lease_expires": now + self._lease,
                "expire_at": now + self._retention,
                "claimed_at": now,
            }
            try:
                written = doc.create({**fields, **lease, "attempts": 1}, retry=self._claim_retry)
                return Claim(key, attempt_id, 1, written.update_time)
            except gexc.AlreadyExists:
                pass
            except gexc.Aborted:
                return Held(key, RunStatus.IN_PROGRESS)
            snapshot = doc.get(retry=self._claim_retry)
            if not snapshot.exists:
                continue  # released between our create and our read: try to create again
            record = snapshot.to_dict() or {}
            if record["attempt_id"] == attempt_id:
                # Our own create landed; only its answer was lost and the retry hit our record.
                return Claim(key, attempt_id, int(record["attempts"]), snapshot.update_time)
            status = RunStatus(record["status"])
            if status is not RunStatus.IN_PROGRESS or record["lease_expires"] > now:
                return Held(
                    key, status, record.get("result"), record.get("error"), record.get("lease_expires")
                )
            return self._take_over(doc, snapshot.update_time, record, lease)
        return Held(key, RunStatus.IN_PROGRESS)

    def _take_over(
        self, doc, read_at: datetime, record: dict[str, Any], lease: dict[str, Any]
    ) -> Claim | Held:
        """Claim a run whose holder's lease expired, unless someone wrote to it since we read it."""
        attempt = int(record.get("attempts", 0)) + 1
        try:
            written = doc.update(
                {**lease, "attempts": attempt, "previous_attempt_id": record["attempt_id"]},
                option=self._client.write_option(last_update_time=read_at),
                retry=self._claim_retry,
            )
        except (gexc.FailedPrecondition, gexc.NotFound, gexc.Aborted):
            now = doc.get()
            if not now.exists or now.get("attempt_id") != lease["attempt_id"]:
                return Held(doc.id, RunStatus.IN_PROGRESS)  # another delivery took it over first
            return Claim(doc.id, lease["attempt_id"], attempt, now.update_time)  # ours; its answer was lost
        return Claim(doc.id, lease["attempt_id"], attempt, written.update_time)

    def complete(self, claim: Claim, result: Any = None) -> bool:
        """Record success. False if this attempt no longer holds the claim (nothing is written)."""
        return self._finish(claim, RunStatus.COMPLETED, {"result": storable(result)})

    def fail(self, claim: Claim, error: str) -> bool:
        """Record a permanent failure: later deliveries are answered without running the job."""
        return self._finish(claim, RunStatus.FAILED, {"error": error[:4096]})

    def release(self, claim: Claim) -> bool:
        """Delete the claim so a retry runs the job at once. False if this attempt lost the claim."""
        doc = self._collection.document(claim.key)
        try:
            doc.delete(
                option=self._client.write_option(last_update_time=claim.update_time), retry=self._finish_retry
            )
            return True
        except (gexc.FailedPrecondition, gexc.NotFound):
            return not doc.get().exists  # an earlier try of ours deleted it, and its answer was lost

    def get(self, key: str) -> dict[str, Any] | None:
        """The stored record of a run, or None."""
        snapshot = self._collection.document(key).get()
        return snapshot.to_dict() if snapshot.exists else None

    def _finish(self, claim: Claim, status: RunStatus, fields: dict[str, Any]) -> bool:
        now = clock.now()
        doc = self._collection.document(claim.key)
        update = {**fields, "status": status.value, "finished_at": now, "expire_at": now + self._retention}
        try:
            doc.update(
                update,
                option=self._client.write_option(last_update_time=claim.update_time),
                retry=self._finish_retry,
            )
            return True
        except (gexc.FailedPrecondition, gexc.NotFound):
            # Either another attempt took the run over, or an earlier try of this very write
            # committed and only its answer was lost: the record tells which.
            record = self.get(claim.key) or {}
            return record.get("attempt_id") == claim.attempt_id and record.get("status") == status.value
