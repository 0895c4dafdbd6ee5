"""The run a job executes: what `current_run()` returns, and the guard against nested runs.

A scheduled job's run is a `Run` (its job, schedule time, project, location, forced); an event
job's is an `EventRun` (the `Event` and the consumer). Both carry the run key and the attempt.

The current run lives in a context variable. Python does not hand context variables to threads
a job starts, so such a thread must be started inside the run's context to call `current_run()`:
`threading.Thread(target=contextvars.copy_context().run, args=(work,))`, or
`executor.submit(contextvars.copy_context().run, work)`.
"""

from __future__ import annotations

import contextvars
import json
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from .errors import NestedRunError


@dataclass(frozen=True)
class Event:
    """The event a job receives, from Pub/Sub push or a CloudEvent alike."""

    id: str
    """Pub/Sub messageId, or the CloudEvent id."""
    source: str
    """The push subscription (`projects/P/subscriptions/S`), or the CloudEvent source."""
    time: datetime | None
    """When it was published (publishTime) or happened (CloudEvent time), in UTC, to the nanosecond
    (a `DatetimeWithNanoseconds`: its `.nanosecond` keeps what `.microsecond` cannot); None if unknown."""
    attributes: dict[str, str] = field(default_factory=dict)
    """The message attributes (Pub/Sub), or the CloudEvent's context attributes."""
    data: bytes = b""
    """The payload: the message data decoded from base64, or the CloudEvent data as sent."""
    delivery_attempt: int | None = None
    """Pub/Sub's count of deliveries (only with a dead-letter policy, never on the emulator)."""
    kind: str = "pubsub"
    """`pubsub` (a push request) or `cloudevent`."""
    ordering_key: str = ""
    """The message's ordering key (Pub/Sub), kept so that a dead-letter copy can be replayed with it."""

    def json(self) -> Any:
        """The data decoded as UTF-8 JSON; ValueError if it is not JSON."""
        return json.loads(self.data.decode("utf-8"))

    def text(self) -> str:
        """The data decoded as UTF-8 (undecodable bytes replaced)."""
        return self.data.decode("utf-8", "replace")


# Marks the request a job is running for, so a nested call is caught even from another thread.
_ENVIRON_KEY = "runonce.run"


@dataclass(frozen=True)
class Run:
    """A scheduled run (`@deduplicated`), as `current_run()` returns it."""

    key: str
    job: str
    schedule_time: str
    """Canonical RFC 3339 UTC form of the scheduled instant."""
    project: str
    location: str
    forced: bool
    attempt_id: str
    attempt: int


@dataclass(frozen=True)
class EventRun:
    """The handling of one event (`@deduplicated_event`), as `current_run()` returns it."""

    key: str
    event: Event
    """The event being handled: its id, source, time, attributes, data and delivery attempt."""
    consumer: str
    """The consumer setting (the `consumer` option, else K_SERVICE; "" if neither): part of a
    CloudEvent's run key (a push subscription names its consumer itself)."""
    attempt_id: str
    attempt: int


_current: contextvars.ContextVar[Run | EventRun] = contextvars.ContextVar("runonce_current_run")


def current_run() -> Run | EventRun:
    """The run being executed: a `Run` in a `@deduplicated` job, an `EventRun` in a
    `@deduplicated_event` job (both have `key`, `attempt_id` and `attempt`); `isinstance` tells
    them apart. Only valid inside a decorated job (and its context)."""
    try:
        return _current.get()
    except LookupError:
        raise RuntimeError(
            "current_run() is only available inside a @deduplicated function; in a thread the job "
            "starts, run the thread's work in the job's context: threading.Thread("
            "target=contextvars.copy_context().run, args=(work,))"
        ) from None


def enter(run: Run | EventRun, request: Any) -> contextvars.Token[Run | EventRun]:
    """Make `run` the current run while the job executes for `request`; `leave` undoes it."""
    environ = _environ(request)
    if environ is not None:
        environ[_ENVIRON_KEY] = run
    return _current.set(run)


def leave(token: contextvars.Token[Run | EventRun], request: Any) -> None:
    """The job is done: no current run any more."""
    _current.reset(token)
    environ = _environ(request)
    if environ is not None:
        environ.pop(_ENVIRON_KEY, None)


def refuse_nested(request: Any, name: str) -> None:
    """Raise NestedRunError if a @deduplicated job is already running for this request or context."""
    environ = _environ(request)
    outer = _current.get(None) or (environ.get(_ENVIRON_KEY) if environ is not None else None)
    if isinstance(outer, Run | EventRun):
        job = outer.job if isinstance(outer, Run) else outer.event.source
        raise NestedRunError(
            f"{name} is @deduplicated and was called inside the @deduplicated job {job!r} "
            f"(run {outer.key}): it would claim that same run again and find it held. Call the "
            f"undecorated function instead: {name}.__wrapped__(request)"
        )


def _environ(request: Any) -> dict[str, Any] | None:
    try:
        environ = request.environ  # a Flask request's WSGI environ
    except Exception:  # not a Flask request (or outside its context)
        return None
    return environ if isinstance(environ, dict) else None
