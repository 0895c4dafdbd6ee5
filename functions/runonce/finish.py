"""How an attempt that holds a claim ends: completed, failed or released, and the answer.

Each finishing write is named in the log for what it was and why it failed: the run was taken
over, the store was unavailable, or the store rejected it. None of them raises.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

from .errors import StoreError
from .ledger import Claim
from .logs import log
from .outcomes import Answer, Outcome
from .results import StoredResult
from .store import Store
from .text import describe, type_name

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

    def ms(self) -> int:
        """Milliseconds since the request arrived."""
        return int((time.monotonic() - self.started) * 1000)


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
    log(
        logging.ERROR,
        f"{'not run' if outcome is Outcome.TOO_OLD else 'job failed permanently'}: {error}"
        + (f"; not recorded: {problem}" if problem else ""),
        outcome=outcome.label,
        recorded=problem is None,
        latency_ms=attempt.ms(),
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
    recorded, problem = _write("the completion write", lambda: store.complete(claim, stored))
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
