"""The seed document's sample pattern, re-implemented from its description as the baseline:
two Firestore transactions per run, each one begin, one read and one commit.

Transaction one reads the record and claims it unless it is finished or leased; transaction
two re-reads it and marks it completed if this attempt still holds it.
"""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta

from google.cloud import firestore


class SeedLedger:
    """Claim and complete with one transaction each."""

    def __init__(self, client: firestore.Client, collection: str, lease: timedelta):
        self._client = client
        self._collection = client.collection(collection)
        self._lease = lease

    def claim(self, key: str) -> str | None:
        """Return an attempt id if this attempt may run the job, None if it must not."""
        doc = self._collection.document(key)
        attempt_id = uuid.uuid4().hex

        @firestore.transactional
        def claim_in(transaction) -> str | None:
            snapshot = doc.get(transaction=transaction)
            now = datetime.now(UTC)
            if snapshot.exists:
                record = snapshot.to_dict() or {}
                if record["status"] != "in_progress" or record["lease_expires"] > now:
                    return None
            transaction.set(
                doc, {"status": "in_progress", "attempt_id": attempt_id, "lease_expires": now + self._lease}
            )
            return attempt_id

        return claim_in(self._client.transaction())

    def complete(self, key: str, attempt_id: str) -> bool:
        """Mark the run completed if this attempt still holds it."""
        doc = self._collection.document(key)

        @firestore.transactional
        def complete_in(transaction) -> bool:
            snapshot = doc.get(transaction=transaction)
            if not snapshot.exists or snapshot.get("attempt_id") != attempt_id:
                return False
            transaction.update(doc, {"status": "completed", "finished_at": datetime.now(UTC)})
            return True

        return complete_in(self._client.transaction())
