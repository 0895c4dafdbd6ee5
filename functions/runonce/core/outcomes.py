"""What a delivery is answered: every outcome with its HTTP status (docs/library.md's tables,
"What Scheduler is answered" and "What Pub/Sub push is answered").

Cloud Scheduler retries any non-2xx and Pub/Sub push redelivers on anything but 102, 200, 201,
202 and 204, so 2xx means "do not deliver this again" (done, a duplicate of a finished run, a
permanent failure, too old, skipped, excluded), 409 means "another attempt (or, `waiting`, another run of
the job) holds it, try later", 500 means "a retry
should run the job", 400 "this is not a delivery". Only 200 acknowledges on both (the Pub/Sub
emulator nacks 202). Never 503, which the serving platform uses for its own overload.
"""

from __future__ import annotations

from enum import Enum
from typing import Any, NamedTuple


class Answer(NamedTuple):
    """The JSON body and status code functions-framework sends back (a plain 2-tuple to Flask)."""

    body: dict[str, Any]
    status: int

    @property
    def outcome(self) -> Outcome:
        """The outcome the body names."""
        return _BY_LABEL[self.body["outcome"]]


class Outcome(Enum):
    """One row of the status table: the body's `outcome` and the HTTP status that carries it."""

    COMPLETED = ("completed", 200)
    DUPLICATE = ("duplicate", 200)
    FAILED = ("failed", 200)
    TOO_OLD = ("too_old", 200)
    SKIPPED = ("skipped", 200)
    """A `skip` job's run met another run of the job holding it: recorded skipped, never run."""
    EXCLUDED = ("excluded", 200)
    """Scheduled outside the job's active window or on an excluded date: recorded, never run."""
    IN_PROGRESS = ("in_progress", 409)
    WAITING = ("waiting", 409)
    """A `wait` job's run met another run of the job holding it: nothing written, retried later."""
    RETRY = ("retry", 500)
    STORE_UNAVAILABLE = ("store_unavailable", 500)
    MISCONFIGURED = ("misconfigured", 500)
    ERROR = ("error", 500)
    REJECTED = ("rejected", 400)
    DEAD_LETTER_FAILED = ("dead_letter_failed", 500)
    """Events only: a failed or too old event could not be forwarded to the dead-letter topic."""

    label: str
    """The body's `outcome` and the log line's `outcome`."""
    status: int
    """The HTTP status code."""

    def __init__(self, label: str, status: int):
        self.label = label
        self.status = status

    def answer(self, **body: Any) -> Answer:
        """The JSON body and status code functions-framework sends back."""
        return Answer({"outcome": self.label, **body}, self.status)


_BY_LABEL = {outcome.label: outcome for outcome in Outcome}
