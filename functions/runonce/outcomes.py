"""What Scheduler is answered: every outcome with its HTTP status (README's status table).

Cloud Scheduler retries any non-2xx, so 2xx means "do not deliver this run again" (done, a
duplicate of a finished run, a permanent failure), 409 means "another attempt holds it, try
later", 500 means "a retry should run the job", 400 "this is not a delivery". Never 503, which
the serving platform uses for its own overload.
"""

from __future__ import annotations

from enum import Enum
from typing import Any

Answer = tuple[dict[str, Any], int]


class Outcome(Enum):
    """One row of the status table: the body's `outcome` and the HTTP status that carries it."""

    COMPLETED = ("completed", 200)
    DUPLICATE = ("duplicate", 200)
    FAILED = ("failed", 200)
    TOO_OLD = ("too_old", 200)
    IN_PROGRESS = ("in_progress", 409)
    RETRY = ("retry", 500)
    STORE_UNAVAILABLE = ("store_unavailable", 500)
    MISCONFIGURED = ("misconfigured", 500)
    ERROR = ("error", 500)
    REJECTED = ("rejected", 400)

    label: str
    """The body's `outcome` and the log line's `outcome`."""
    status: int
    """The HTTP status code."""

    def __init__(self, label: str, status: int):
        self.label = label
        self.status = status

    def answer(self, **body: Any) -> Answer:
        """The JSON body and status code functions-framework sends back."""
        return {"outcome": self.label, **body}, self.status
