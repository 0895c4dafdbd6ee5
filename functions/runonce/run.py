"""The run a job executes: what `current_run()` returns, and the guard against nested runs.

The current run lives in a context variable. Python does not hand context variables to threads
a job starts, so such a thread must be started inside the run's context to call `current_run()`:
`threading.Thread(target=contextvars.copy_context().run, args=(work,))`, or
`executor.submit(contextvars.copy_context().run, work)`.
"""

from __future__ import annotations

import contextvars
from dataclasses import dataclass
from typing import Any

from .errors import NestedRunError
from .event import Event

# Marks the request a job is running for, so a nested call is caught even from another thread.
_ENVIRON_KEY = "runonce.run"


@dataclass(frozen=True)
class Run:
    """The run the current job executes, as `current_run()` returns it."""

    key: str
    job: str
    schedule_time: str
    """Canonical RFC 3339 UTC form of the scheduled instant (an event's publish or event time)."""
    project: str
    location: str
    forced: bool
    attempt_id: str
    attempt: int
    event: Event | None = None
    """The event being handled (`@deduplicated_event`); None for a scheduled run."""


_current: contextvars.ContextVar[Run] = contextvars.ContextVar("runonce_current_run")


def current_run() -> Run:
    """The run being executed; only valid inside a `@deduplicated` function (and its context)."""
    try:
        return _current.get()
    except LookupError:
        raise RuntimeError(
            "current_run() is only available inside a @deduplicated function; in a thread the job "
            "starts, run the thread's work in the job's context: threading.Thread("
            "target=contextvars.copy_context().run, args=(work,))"
        ) from None


def enter(run: Run, request: Any) -> contextvars.Token[Run]:
    """Make `run` the current run while the job executes for `request`; `leave` undoes it."""
    environ = _environ(request)
    if environ is not None:
        environ[_ENVIRON_KEY] = run
    return _current.set(run)


def leave(token: contextvars.Token[Run], request: Any) -> None:
    """The job is done: no current run any more."""
    _current.reset(token)
    environ = _environ(request)
    if environ is not None:
        environ.pop(_ENVIRON_KEY, None)


def refuse_nested(request: Any, name: str) -> None:
    """Raise NestedRunError if a @deduplicated job is already running for this request or context."""
    environ = _environ(request)
    outer = _current.get(None) or (environ.get(_ENVIRON_KEY) if environ is not None else None)
    if isinstance(outer, Run):
        raise NestedRunError(
            f"{name} is @deduplicated and was called inside the @deduplicated job {outer.job!r} "
            f"(run {outer.key}): it would claim that same run again and find it held. Call the "
            f"undecorated function instead: {name}.__wrapped__(request)"
        )


def _environ(request: Any) -> dict[str, Any] | None:
    try:
        environ = request.environ  # a Flask request's WSGI environ
    except Exception:  # not a Flask request (or outside its context)
        return None
    return environ if isinstance(environ, dict) else None
