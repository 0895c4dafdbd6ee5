"""The baseline of the Valkey benchmarks: AWS Lambda Powertools' Redis idempotency layer as it
claims and completes a run, re-implemented from its description (powertools-lambda-python,
aws_lambda_powertools/utilities/idempotency/persistence/redis.py): the in-progress record, JSON
built in the client, set with `SET NX EX`; a key already there is read with `GET` and judged in
the client; the completed record set over it with a plain `SET EX`; a failure deletes it. Two
round trips on the happy path, and no fencing: the pattern issue 31 cites for its double runs.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import valkey


@dataclass
class PowertoolsPattern:
    """Powertools' Redis persistence layer, claim and completion: the in-progress record set only
    if the key is absent (`SET NX EX`), the completed one set over it unconditionally."""

    client: valkey.Valkey
    expires_after: timedelta
    """How long a record is kept (Powertools' expires_after_seconds)."""
    in_progress: timedelta
    """How long an in-progress record holds the key against a duplicate (its Lambda's timeout)."""

    def claim(self, key: str) -> bool:
        """True if this call created the record (SET NX answered OK); a duplicate is then read."""
        now = time.time()
        record = {
            "status": "INPROGRESS",
            "expiration": int(now + self.expires_after.total_seconds()),
            "in_progress_expiration": int((now + self.in_progress.total_seconds()) * 1000),
        }
        ttl = int(self.expires_after.total_seconds())
        if self.client.set(key, json.dumps(record), ex=ttl, nx=True):
            return True
        self.client.get(key)  # Powertools reads the record to tell completed from in progress
        return False

    def complete(self, key: str, result: Any) -> None:
        """The completed record written over whatever is there."""
        now = time.time()
        record = {
            "data": json.dumps(result),
            "status": "COMPLETED",
            "expiration": int(now + self.expires_after.total_seconds()),
        }
        self.client.set(key, json.dumps(record), ex=int(self.expires_after.total_seconds()))

    def fail(self, key: str) -> None:
        """The record deleted, as Powertools deletes it when the function raises."""
        self.client.delete(key)
