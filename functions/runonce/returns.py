"""What a job's return value says: a result, a retryable failure or a permanent one.

A job is a Flask view, so it may return what Flask accepts: data, `(body, status)`,
`(body, status, headers)` or a `Response`. Its HTTP status decides the run's fate:

- below 400 (or no status): success, and the body is the run's result;
- 408, 429 and 500-599: a retryable failure, like an exception (the claim is released);
- any other 4xx: a permanent failure, like `PermanentError` (recorded, never run again).

`async def` and generator functions are refused when decorated: calling them only creates a
coroutine or generator, so their bodies would never run. A plain function that returns one (or any
value runonce cannot even inspect) did run its body: it succeeds, with the result not stored.
"""

from __future__ import annotations

import inspect
import json
import re
from dataclasses import dataclass
from enum import Enum
from typing import Any

from werkzeug.wrappers import Response

from .errors import NotRunnable
from .text import clip, describe, type_name

RETRYABLE_4XX = frozenset({408, 429})
_STATUS_TEXT = re.compile(r"^\s*([1-5][0-9]{2})\b")


class Verdict(Enum):
    """How the run ends, by the job's status."""

    SUCCEEDED = "succeeded"
    RETRYABLE = "retryable"
    PERMANENT = "permanent"


@dataclass(frozen=True)
class Returned:
    """A job's return value, read: the verdict, the body and the status it carried, if any."""

    verdict: Verdict
    body: Any
    status: int | None = None
    dropped: str | None = None
    """Why the body cannot be stored as the result (a coroutine, an object that cannot be read)."""

    def error(self) -> str:
        """The failure as stored and answered: the status and the start of the body."""
        return f"the job returned HTTP {self.status}: {_body_text(self.body)}"


def refuse_unrunnable(job: Any) -> None:
    """Raise NotRunnable if calling `job` would only create a coroutine or generator."""
    call = getattr(job, "__call__", None) if not inspect.isroutine(job) else None  # noqa: B004
    for candidate in (job, call):
        if candidate is None:
            continue
        if inspect.iscoroutinefunction(candidate) or inspect.isasyncgenfunction(candidate):
            raise NotRunnable(
                f"@deduplicated cannot run {_name(job)}: it is an async function, so calling it only "
                "creates a coroutine and its body would never run. Make it a plain def (call async "
                "code with asyncio.run inside it)."
            )
        if inspect.isgeneratorfunction(candidate):
            raise NotRunnable(
                f"@deduplicated cannot run {_name(job)}: it is a generator function (it yields), so "
                "calling it only creates a generator and its body would never run. Return the "
                "result instead of yielding it."
            )


def read_return(value: Any) -> Returned:
    """Read what the job returned. A streamed Response's body is job code: it runs here."""
    try:
        status, body = _unpack(value)
        dropped = _unstorable(body)
    except Exception as exc:  # a value whose class or length raises: the job still ran
        return Returned(
            Verdict.SUCCEEDED,
            None,
            None,
            f"runonce could not read it ({type_name(exc)}: {describe(exc, 300)})",
        )
    if isinstance(body, Response):
        status = body.status_code if status is None else status
        body = _response_body(body)
    if status is None or status < 400:
        return Returned(Verdict.SUCCEEDED, None if dropped else body, status, dropped)
    if status >= 500 or status in RETRYABLE_4XX:
        return Returned(Verdict.RETRYABLE, body, status)
    return Returned(Verdict.PERMANENT, body, status)


def _unpack(value: Any) -> tuple[int | None, Any]:
    """(status, body) of a Flask-style return value: a 2- or 3-tuple with a status, or the value."""
    if isinstance(value, tuple) and len(value) in (2, 3):
        status = _status(value[1])
        if status is not None:
            return status, value[0]
    return None, value


# Plain data, by far the most common return value, needs none of the checks below.
_PLAIN = frozenset({dict, list, str, int, float, bool, type(None), bytes})


def _unstorable(value: Any) -> str | None:
    """Why a coroutine, generator or other awaitable is no result (closing what never started)."""
    if type(value) in _PLAIN:
        return None
    if inspect.iscoroutine(value) or inspect.isgenerator(value):
        value.close()  # never started: closing it avoids a "never awaited" warning
    elif not (inspect.isawaitable(value) or inspect.isasyncgen(value)):
        return None
    return (
        f"the job returned a {type_name(value)}, whose code never runs under runonce; await or "
        "iterate it inside the job and return its result"
    )


def _status(candidate: Any) -> int | None:
    """A Flask-style status (int, or text starting with the code), or None if it is not one."""
    if isinstance(candidate, int) and not isinstance(candidate, bool):
        code = int(candidate)
        return code if 100 <= code <= 599 else None
    if isinstance(candidate, str):
        match = _STATUS_TEXT.match(candidate)
        return int(match.group(1)) if match else None
    return None


def _response_body(response: Response) -> Any:
    """A Response's body as a result: its JSON if it says it is JSON, else its text."""
    text = response.get_data(as_text=True)
    if response.is_json:
        try:
            return json.loads(text)
        except ValueError:
            pass
    return text


def _body_text(body: Any) -> str:
    if isinstance(body, bytes):
        text = body.decode("utf-8", "replace")
    elif isinstance(body, str):
        text = "".join([body])
    else:
        try:
            text = json.dumps(body, default=str)
        except Exception:
            text = f"<{type_name(body)}>"
    return clip(text, 1024)


def _name(job: Any) -> str:
    return str(getattr(job, "__qualname__", None) or getattr(job, "__name__", None) or type_name(job))
