"""How a job's run ends: what its return value says, then completed, failed or released, and the answer.

A job is a view of its web framework, so it may return data, `(body, status)`,
`(body, status, headers)` or its framework's response object (read by its host's
`ResponseReader`, `runonce.core.host`). Its HTTP status decides the run's fate:

- below 400 (or no status): success, and the body is the run's result;
- 408, 429 and 500-599: a retryable failure, like an exception (the claim is released);
- any other 4xx: a permanent failure, like `PermanentError` (recorded, never run again).

`async def` and generator functions are refused when decorated: calling them only creates a
coroutine or generator, so their bodies would never run. A plain function that returns one (or any
value runonce cannot even inspect) did run its body: it succeeds, with the result not stored.

Each finishing write is named in the log for what it was and why it failed: the run was taken
over, the store was unavailable, or the store rejected it. None of them raises.
"""

from __future__ import annotations

import inspect
import json
import logging
import re
import time
from collections.abc import Callable
from dataclasses import dataclass
from enum import Enum
from typing import TYPE_CHECKING, Any, NamedTuple, TypeVar

from .._logs import log
from .._text import clip, describe, type_name
from .errors import NotRunnable, StoreError
from .outcomes import Answer, Outcome
from .store import Claim, Done, Store, StoredResult

if TYPE_CHECKING:
    from .host import ResponseReader

RETRYABLE_4XX = frozenset({408, 429})
_STATUS_TEXT = re.compile(r"^\s*([1-5][0-9]{2})\b")


class Verdict(Enum):
    """How the run ends, by the job's status."""

    SUCCEEDED = "succeeded"
    RETRYABLE = "retryable"
    PERMANENT = "permanent"


class Returned(NamedTuple):
    """A job's return value, read: the verdict, the body and the status it carried, if any."""

    verdict: Verdict
    body: Any
    status: int | None = None
    dropped: str | None = None
    """Why the body cannot be stored as the result (a coroutine, an object that cannot be read)."""

    def error(self) -> str:
        """The failure as stored and answered: the status and the start of the body."""
        return f"the job returned HTTP {self.status}: {_body_text(self.body)}"


def refuse_unrunnable(job: Any, awaited: bool = False) -> bool:
    """Raise NotRunnable if calling `job` would only create a coroutine or generator; with
    `awaited` (a host that awaits jobs), an `async def` job is runnable. Whether it is one."""
    call = getattr(job, "__call__", None) if not inspect.isroutine(job) else None  # noqa: B004
    is_async = False
    for candidate in (job, call):
        if candidate is None:
            continue
        if inspect.isasyncgenfunction(candidate) and awaited:
            raise NotRunnable(
                f"@deduplicated cannot run {_name(job)}: it is an async generator function (it "
                "yields), so its body would never run. Return the result instead of yielding it."
            )
        if inspect.iscoroutinefunction(candidate) or inspect.isasyncgenfunction(candidate):
            if not awaited:
                raise NotRunnable(
                    f"@deduplicated cannot run {_name(job)}: it is an async function, so calling it "
                    "only creates a coroutine and its body would never run. Make it a plain def (call "
                    "async code with asyncio.run inside it), or serve it from FastAPI or Starlette "
                    "with runonce.scheduler.asgi.deduplicated, which awaits it."
                )
            is_async = True
        if inspect.isgeneratorfunction(candidate):
            raise NotRunnable(
                f"@deduplicated cannot run {_name(job)}: it is a generator function (it yields), so "
                "calling it only creates a generator and its body would never run. Return the "
                "result instead of yielding it."
            )
    return is_async


def read_return(value: Any, read_response: ResponseReader | None = None) -> Returned:
    """Read what the job returned, a response of its framework by `read_response`. A streamed
    response's body is job code: it runs here."""
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
    response = read_response(body) if read_response is not None else None
    if response is not None:
        status = response[0] if status is None else status
        body = response[1]
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


T = TypeVar("T")


@dataclass
class Attempt:
    """What the outer guard must know to leave no claim needlessly held."""

    started: float
    store: Store | None = None
    claim: Claim | None = None
    succeeded: bool = False
    """The job returned a success (its completion must be recorded, never released)."""
    finished: bool = False
    """The claim was completed, failed or released (or found lost)."""
    defer: bool = False
    """The adapter may still change a failure's or a duplicate's answer (an event's forwarding): their
    answering line waits, held here, until `settle` (`serve` settles what is still held)."""
    held_line: tuple[int, str, dict[str, Any]] | None = None
    done: Done | None = None
    """Where the completion enters the run in its job's completions (`Run.previous`), if anywhere."""

    def ms(self) -> int:
        """Milliseconds since the request arrived."""
        return int((time.monotonic() - self.started) * 1000)

    def answer_line(self, level: int, message: str, **fields: Any) -> None:
        """Write the line that answers the delivery, with `latency_ms`; held instead if `defer`."""
        if self.defer:
            self.held_line = (level, message, fields)
        else:
            log(level, message, **fields, latency_ms=self.ms())

    def settle(self, answering: bool) -> None:
        """Write the held line, if any: as the answer (with `latency_ms`, now), or as a step of a
        delivery that another line answers (one delivery has one line with `latency_ms`)."""
        if self.held_line is None:
            return
        level, message, fields = self.held_line
        self.held_line = None
        if answering:
            fields = {**fields, "latency_ms": self.ms()}
        log(level, message, **fields)


def store_problem(exc: Exception) -> str:
    """What went wrong with a store call: the store's own words, or why the call was not made."""
    if isinstance(exc, StoreError):
        return exc.problem
    return f"it could not be sent ({type_name(exc)}: {describe(exc, 500)})"


def _write(what: str, call: Callable[[], T]) -> tuple[T | None, str | None]:
    """A finishing write: its result, or None and why it failed (it never raises)."""
    try:
        return call(), None
    except Exception as exc:
        return None, f"{what} failed: {store_problem(exc)}"


def _claim_write(attempt: Attempt, what: str, call: Callable[[], bool]) -> str | None:
    """A write that ends this attempt's hold on the claim: None, or why it failed."""
    done, problem = _write(what, call)
    attempt.finished = True
    if done is False:
        problem = f"{what} found the run taken over by another attempt"
    return problem


def fail(attempt: Attempt, claim: Claim, error: str, outcome: Outcome = Outcome.FAILED) -> Answer:
    """A permanent failure (or an event too old to run): record it, answer 2xx so delivery stops."""
    assert attempt.store is not None
    store = attempt.store
    problem = _claim_write(attempt, "the failure write", lambda: store.fail(claim, error))
    attempt.answer_line(
        logging.ERROR,
        f"{'not run' if outcome is Outcome.TOO_OLD else 'job failed permanently'}: {error}"
        + (f"; not recorded: {problem}" if problem else ""),
        outcome=outcome.label,
        recorded=problem is None,
    )
    return outcome.answer(run_key=claim.key, error=error, recorded=problem is None)


def release(attempt: Attempt, claim: Claim) -> tuple[bool, str | None]:
    """Give the claim back so a retry runs at once: whether that worked, and if not, why."""
    assert attempt.store is not None
    store = attempt.store
    problem = _claim_write(attempt, "the release", lambda: store.release(claim))
    return problem is None, problem


def retry(attempt: Attempt, claim: Claim, error: str, exc: BaseException | None) -> Answer:
    """A retryable failure: release the claim so the retry runs at once, answer 500."""
    released, problem = release(attempt, claim)
    log(
        logging.ERROR,
        f"job failed, will be retried: {describe(exc) if exc is not None else error}"
        + (f"; {problem}" if problem else ""),
        exc_info=exc is not None,
        outcome=Outcome.RETRY.label,
        released=released,
        latency_ms=attempt.ms(),
    )
    return Outcome.RETRY.answer(run_key=claim.key, error=error)


def hold(attempt: Attempt, claim: Claim, error: str, seconds: float) -> Answer:
    """The job's work may have taken effect: keep the claim for `seconds`, answer 409 so a later
    delivery comes back, and takes the run over once the hold has passed."""
    assert attempt.store is not None
    store = attempt.store
    # Written or not, the claim is never released: its lease still holds the run.
    problem = _claim_write(attempt, "the hold", lambda: store.hold(claim, seconds, error))
    log(
        logging.ERROR,
        f"job's outcome unknown, run held for {seconds:g} s: {error}"
        + (f"; the hold was not written ({problem}), the claim's lease holds it" if problem else ""),
        outcome=Outcome.IN_PROGRESS.label,
        held=problem is None,
        latency_ms=attempt.ms(),
    )
    return Outcome.IN_PROGRESS.answer(run_key=claim.key, error=error, held_seconds=seconds)


def complete(attempt: Attempt, claim: Claim, stored: StoredResult) -> Answer:
    """Record the success: the job did run, so the answer is 2xx whatever the write does."""
    assert attempt.store is not None
    store = attempt.store
    done = attempt.done

    def write() -> StoredResult | None:
        return store.complete(claim, stored) if done is None else store.complete(claim, stored, done)

    recorded, problem = _write("the completion write", write)
    attempt.finished = True
    if recorded is not None:
        stored = recorded  # what the record holds is what later duplicates are told
        log(logging.INFO, "run completed", outcome=Outcome.COMPLETED.label, latency_ms=attempt.ms())
    else:
        problem = problem or "the completion write found the run taken over by another attempt"
        log(
            logging.ERROR,
            f"run completed but its completion was not recorded: {problem}",
            outcome=Outcome.COMPLETED.label,
            recorded=False,
            latency_ms=attempt.ms(),
        )
    return Outcome.COMPLETED.answer(
        run_key=claim.key, attempt=claim.attempt, **stored.answer(), recorded=recorded is not None
    )
