"""A deadline shared by the store calls of one ledger operation.

Without one, each call would wait up to the client's default of 60 s on a hung store; with one,
a claim gives up after `CLAIM_SECONDS` and a finishing write after `FINISH_SECONDS` in all, however
many calls and retries that takes.
"""

from __future__ import annotations

import time
from typing import Any

from google.api_core import exceptions as gexc
from google.api_core.retry import Retry


class Budget:
    """Time left for one operation; hands each store call its `timeout` and `retry`."""

    def __init__(self, seconds: float, retry: Retry):
        self._deadline = time.monotonic() + seconds
        self._retry = retry

    def call(self) -> dict[str, Any]:
        """Keyword arguments for the next store call: all the time left, retried within it.

        The retries stop a second before the deadline so the last try still has a second to run
        (api_core gives a try that would have less than a second the whole timeout again).
        """
        left = self._deadline - time.monotonic()
        if left <= 0:
            raise gexc.DeadlineExceeded("the run ledger's time for this operation ran out")
        return {"timeout": left, "retry": self._retry.with_timeout(max(left - 1.0, 0.0))}
