"""The run a job executes: what `current_run()` returns, and the guard against nested runs.

A scheduled job's run is a `Run` (its job, schedule time, project, location, forced); an event
job's is an `EventRun` (`runonce.core.event`: the `Event` and the consumer). Both carry the run
key and the attempt.

The current run lives in a context variable. Python does not hand context variables to threads
a job starts, so such a thread must be started inside the run's context to call `current_run()`:
`threading.Thread(target=contextvars.copy_context().run, args=(work,))`, or
`executor.submit(contextvars.copy_context().run, work)`.
"""

from __future__ import annotations

import contextvars
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, NamedTuple

from .errors import NestedRunError

if TYPE_CHECKING:
    from .event import EventRun
    from .store import Previous


# Marks the request a job is running for, so a nested call is caught even from another thread.
_ENVIRON_KEY = "runonce.run"


class Run(NamedTuple):
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
    lookup: Callable[[], Previous | None] | None = None
    """Reads `previous` (once, on first use); None: the run has no completions index."""

    @property
    def previous(self) -> Previous | None:
        """The job's latest completed run scheduled before this one (its `key`, `schedule_time`
        and `result`), or None. One read of the store, on first use only (docs/library.md)."""
        return None if self.lookup is None else self.lookup()


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
    if outer is not None:  # only runs are stored there: a scheduled Run or an EventRun
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
