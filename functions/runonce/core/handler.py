"""The core: claim -> run -> finish for one occurrence, whatever transport brought it.

An adapter (`runonce.scheduler` for Cloud Scheduler, `runonce.events` for Pub/Sub push and
CloudEvents) turns a request into an `Occurrence` and the `Answer` returned here into what its
transport expects.
This module knows no headers, no envelope and no database: it talks to a `Store`.

Every way out is an `Answer` with an outcome (see `outcomes`), whatever the job raises or
returns: one outer guard (`serve`) turns anything unforeseen into `error` and gives back a claim
this attempt still holds. Only a process that dies (SIGKILL, os._exit, out of memory) leaves its
claim held, until the lease expires; SystemExit and KeyboardInterrupt release it before going on up.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from .. import _logs as logs
from .._logs import log
from .._text import describe, type_name
from ..contract import (
    BODY_END_FIELD,
    BODY_ERROR_FIELD,
    BODY_FIELD,
    WALL_TIME_FIELD,
    BodyEnd,
    BodyStage,
    Overlap,
    RunStatus,
)
from .errors import ConfigError, OutcomeUnknown, PermanentError, StoreDenied, StoreError, StoreUnavailable
from .fields import BadField
from .finish import Attempt, Returned, Verdict, complete, fail, hold, read_return, release, retry
from .occurrence import Occurrence
from .outcomes import Answer, Outcome
from .run import Run, enter, leave
from .store import Claim, Held, Overlapped, Store, StoredResult, waiting_note

if TYPE_CHECKING:
    from .event import EventRun
    from .host import ResponseReader


def serve(handle: Callable[[Attempt], Answer]) -> Answer:
    """Run `handle` for one request in a log scope of its own, behind the outer guard."""
    attempt = Attempt(time.monotonic())
    scope = logs.open_scope()
    try:
        answer = handle(attempt)
        attempt.settle(answering=True)
        return answer
    except Exception as exc:
        return _unexpected(exc, attempt)
    finally:
        attempt.settle(answering=False)  # a held line the process is leaving with (SystemExit)
        logs.close_scope(scope)


def misconfigured(exc: ConfigError, attempt: Attempt) -> Answer:
    """runonce cannot be set up (a setting, the credentials, the project): nothing ran."""
    error = describe(exc)
    log(
        logging.ERROR,
        f"runonce is misconfigured: {error}",
        outcome=Outcome.MISCONFIGURED.label,
        latency_ms=attempt.ms(),
    )
    return Outcome.MISCONFIGURED.answer(error=error)


def run_once(
    store: Store,
    occurrence: Occurrence,
    job: Callable[[], Any],
    attempt: Attempt,
    carrier: Any,
    claimed: Claim | None = None,
    read_response: ResponseReader | None = None,
) -> Answer:
    """Claim the occurrence, run `job` if this attempt holds it, finish, and say how it ended.

    `carrier` is what the job was called for (the request, the CloudEvent): a nested decorated
    call made with it is refused (see `runonce.core.run.refuse_nested`). `claimed` is a claim of
    the occurrence the adapter already holds (a re-run's, taken with its request): it is not
    claimed again. `read_response` reads a response object of the job's framework it may return.
    """
    attempt.store, attempt.done = store, occurrence.done
    try:
        claim = _claim(store, occurrence, claimed)
    except StoreError as exc:
        return claim_failed(exc, occurrence.key, attempt)
    if isinstance(claim, Overlapped):
        attempt.claim = None  # a claim given up by the store (a re-run's): nothing left to give back
        return _overlapped_answer(claim, store, attempt)
    if isinstance(claim, Held):
        return _held_answer(claim, attempt)
    attempt.claim = claim
    logs.bind(attempt_id=claim.attempt_id, attempt=claim.attempt)
    if occurrence.expired is not None:
        if claim.attempt == 1:
            return fail(attempt, claim, occurrence.expired, Outcome.TOO_OLD)
        log(
            logging.WARNING,
            "past its maximum age, but a takeover: running it, as the attempt taken over may have "
            "started its body",
        )
    return _execute(job, carrier, attempt, claim, occurrence.run(claim), read_response)


def rejected(exc: BadField, what: str, log_key: str, attempt: Attempt) -> Answer:
    """The request is not a `what` runonce can run (`exc` names the field): 400, nothing written.
    `log_key` names the field on the log line (`header` for a delivery, `field` for an event)."""
    error = describe(exc, 1024)
    fields: dict[str, Any] = {log_key: exc.field, "latency_ms": attempt.ms()}
    log(logging.WARNING, f"rejected {what}: {error}", outcome=Outcome.REJECTED.label, **fields)
    return Outcome.REJECTED.answer(error=error)


def claim_failed(exc: StoreError, key: str, attempt: Attempt) -> Answer:
    """The claim (or a look before it) could not be made; nothing ran."""
    if isinstance(exc, StoreDenied):
        error, outcome = f"the run ledger cannot be used: {exc.problem}", Outcome.MISCONFIGURED
    elif isinstance(exc, StoreUnavailable):
        error, outcome = f"the claim failed: {exc.problem}", Outcome.STORE_UNAVAILABLE
    else:
        error, outcome = f"the claim failed: {exc.problem}", Outcome.ERROR
    log(logging.ERROR, f"run not claimed: {error}", outcome=outcome.label, latency_ms=attempt.ms())
    return outcome.answer(run_key=key, error=error)


def _claim(store: Store, occurrence: Occurrence, claimed: Claim | None) -> Claim | Held | Overlapped:
    """The occurrence claimed, with its job's lock if it has one (docs/schedules/overlap.md); a claim the
    adapter already holds (a re-run's) takes the lock now."""
    lock = occurrence.lock
    if claimed is not None:
        return claimed if lock is None or claimed.lock is not None else store.take_lock(claimed, lock)
    if lock is None:
        return store.claim(occurrence.key, occurrence.fields)
    return store.claim_locked(occurrence.key, occurrence.fields, lock)


def _overlapped_answer(overlapped: Overlapped, store: Store, attempt: Attempt) -> Answer:
    """Another run of the job holds it: `skipped` (recorded, 200) or `waiting` (409, for a retry,
    after a note that says so, for the watchdog if the retries run out first)."""
    lease = str(overlapped.lease_expires or "")
    if overlapped.policy is Overlap.SKIP:
        attempt.answer_line(
            logging.INFO,
            f"run {overlapped.holder} of this job is in progress: run recorded skipped, not run",
            outcome=Outcome.SKIPPED.label,
            skipped_for=overlapped.holder,
        )
        return Outcome.SKIPPED.answer(run_key=overlapped.key, skipped_for=overlapped.holder)
    try:
        store.note(
            waiting_note(overlapped.key), {"waiting_run": overlapped.key, "waiting_for": overlapped.holder}
        )
    except StoreError as exc:  # the 409 stands: the note only names how the run may be missed
        log(
            logging.WARNING,
            f"waiting note not written ({exc}): if its retries run out, it is never_delivered",
        )
    attempt.answer_line(
        logging.INFO,
        f"run {overlapped.holder} of this job is in progress: not run, asking for a retry later",
        outcome=Outcome.WAITING.label,
        waiting_for=overlapped.holder,
    )
    return Outcome.WAITING.answer(run_key=overlapped.key, waiting_for=overlapped.holder, lease_expires=lease)


def _held_answer(held: Held, attempt: Attempt) -> Answer:
    if held.status is RunStatus.IN_PROGRESS:
        log(
            logging.INFO,
            "run in progress elsewhere; asking for a retry later",
            outcome=Outcome.IN_PROGRESS.label,
            latency_ms=attempt.ms(),
        )
        return Outcome.IN_PROGRESS.answer(run_key=held.key, lease_expires=str(held.lease_expires or ""))
    attempt.answer_line(
        logging.INFO,
        f"duplicate delivery of a {held.status.value} run; not running",
        outcome=Outcome.DUPLICATE.label,
    )
    told = held.stored.answer() if held.stored is not None else {"result": held.result}
    if held.skipped_for is not None:
        told["skipped_for"] = held.skipped_for
    return Outcome.DUPLICATE.answer(run_key=held.key, status=held.status.value, **told, error=held.error)


def _execute(
    job: Callable[[], Any],
    carrier: Any,
    attempt: Attempt,
    claim: Claim,
    run: Run | EventRun,
    read_response: ResponseReader | None,
) -> Answer:
    token = enter(run, carrier)
    _body_line(BodyStage.STARTED)
    try:
        returned: Returned = read_return(job(), read_response)
    except PermanentError as exc:
        _body_line(BodyStage.ENDED, BodyEnd.PERMANENT, exc)
        return fail(attempt, claim, describe(exc))
    except OutcomeUnknown as exc:
        _body_line(BodyStage.ENDED, BodyEnd.HELD, exc)
        return hold(attempt, claim, describe(exc), exc.hold_seconds)
    except (SystemExit, KeyboardInterrupt) as exc:
        _body_line(BodyStage.ENDED, BodyEnd.STOPPED, exc)
        released, _ = release(attempt, claim)
        log(
            logging.ERROR,
            f"job stopped the process ({type_name(exc)}); claim released: {released}",
            outcome=Outcome.RETRY.label,
            released=released,
            latency_ms=attempt.ms(),
        )
        raise
    except BaseException as exc:  # anything else the job raises is retried
        _body_line(BodyStage.ENDED, BodyEnd.RETRYABLE, exc)
        return retry(attempt, claim, type_name(exc), exc)
    finally:
        leave(token, carrier)
    # Set before the line below can raise: the outer guard then completes a success, not releases it.
    attempt.succeeded = returned.verdict is Verdict.SUCCEEDED
    _body_line(BodyStage.ENDED, BodyEnd(returned.verdict.value))
    if returned.verdict is Verdict.PERMANENT:
        return fail(attempt, claim, returned.error())
    if returned.verdict is Verdict.RETRYABLE:
        return retry(attempt, claim, returned.error(), None)
    if returned.dropped is not None:
        return complete(attempt, claim, StoredResult.not_stored(returned.dropped))
    return complete(attempt, claim, StoredResult.of(returned.body))


def _body_line(stage: BodyStage, end: BodyEnd | None = None, exc: BaseException | None = None) -> None:
    """The line before or after the job body: with the ledger it tells how often a run's body
    started and whether two ever overlapped, which the record alone cannot (see `runonce.contract`)."""
    fields: dict[str, Any] = {BODY_FIELD: stage.value}
    if end is not None:
        fields[BODY_END_FIELD] = end.value
    if exc is not None:
        fields[BODY_ERROR_FIELD] = type_name(exc)
    # The wall clock, not runonce's (which a local simulation accelerates): when it happened.
    fields[WALL_TIME_FIELD] = datetime.now(UTC).isoformat()
    log(logging.INFO, f"job body {stage.value}" + (f": {end.value}" if end else ""), **fields)


def _unexpected(exc: Exception, attempt: Attempt) -> Answer:
    """The outer guard: answer JSON, and give back (or complete) a claim this attempt still holds."""
    attempt.settle(answering=False)
    claim, store = attempt.claim, attempt.store
    if claim is not None and store is not None and not attempt.finished:
        if attempt.succeeded:  # the job ran: its completion must not be lost, even without a result
            stored = StoredResult.not_stored(f"runonce failed before storing it ({type_name(exc)})")
            return complete(attempt, claim, stored)
        release(attempt, claim)
    log(
        logging.ERROR,
        f"runonce failed unexpectedly: {describe(exc)}",
        exc_info=True,
        outcome=Outcome.ERROR.label,
        latency_ms=attempt.ms(),
    )
    body: dict[str, Any] = {"error": type_name(exc)}
    if claim is not None:
        body["run_key"] = claim.key
    return Outcome.ERROR.answer(**body)
