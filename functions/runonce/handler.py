"""`@deduplicated`: request -> delivery -> run key -> claim -> job -> finish -> answer.

Every way out is a JSON answer with an outcome (see `outcomes`), whatever the job raises or
returns: one outer guard turns anything unforeseen into `error` and gives back a claim this
attempt still holds. Only a process that dies (SIGKILL, os._exit, out of memory) leaves its claim
held, until the lease expires; SystemExit and KeyboardInterrupt release it before going on up.
"""

from __future__ import annotations

import dataclasses
import functools
import logging
import time
from collections.abc import Callable
from typing import Any

from google.api_core import exceptions as gexc
from google.cloud import firestore

from . import clock, logs
from .connection import Connection, Setup
from .delivery import BadDelivery, Delivery, parse_delivery
from .errors import ConfigError, NotRunnable, PermanentError
from .finish import Attempt, complete, fail, release, retry, store_problem
from .keys import run_key
from .ledger import TRANSIENT, Claim, Held, Ledger, RunStatus
from .logs import log
from .outcomes import Answer, Outcome
from .results import StoredResult
from .returns import Returned, Verdict, read_return, refuse_unrunnable
from .run import Run, enter, leave, refuse_nested
from .text import describe, type_name
from .trace import trace_fields


def _held_answer(held: Held, attempt: Attempt) -> Answer:
    if held.status is RunStatus.IN_PROGRESS:
        log(
            logging.INFO,
            "run in progress elsewhere; asking Scheduler to retry later",
            outcome=Outcome.IN_PROGRESS.label,
            latency_ms=attempt.ms(),
        )
        return Outcome.IN_PROGRESS.answer(run_key=held.key, lease_expires=str(held.lease_expires or ""))
    log(
        logging.INFO,
        f"duplicate delivery of a {held.status.value} run; not running",
        outcome=Outcome.DUPLICATE.label,
        latency_ms=attempt.ms(),
    )
    told = held.stored.answer() if held.stored is not None else {"result": held.result}
    return Outcome.DUPLICATE.answer(run_key=held.key, status=held.status.value, **told, error=held.error)


def _execute(
    job: Callable[[Any], Any], request: Any, attempt: Attempt, claim: Claim, delivery: Delivery
) -> Answer:
    attempt.claim = claim
    logs.bind(attempt_id=claim.attempt_id, attempt=claim.attempt)
    run = Run(
        key=claim.key,
        job=delivery.job,
        schedule_time=delivery.schedule_time.rfc3339(),
        project=delivery.project,
        location=delivery.location,
        forced=delivery.forced,
        attempt_id=claim.attempt_id,
        attempt=claim.attempt,
    )
    token = enter(run, request)
    try:
        returned: Returned = read_return(job(request))
    except PermanentError as exc:
        return fail(attempt, claim, describe(exc))
    except NotRunnable as exc:
        released, _ = release(attempt, claim)
        error = describe(exc)
        log(
            logging.ERROR,
            f"job cannot run: {error}",
            outcome=Outcome.MISCONFIGURED.label,
            released=released,
            latency_ms=attempt.ms(),
        )
        return Outcome.MISCONFIGURED.answer(run_key=claim.key, error=error)
    except (SystemExit, KeyboardInterrupt) as exc:
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
        return retry(attempt, claim, type_name(exc), exc)
    finally:
        leave(token, request)
    if returned.verdict is Verdict.PERMANENT:
        return fail(attempt, claim, returned.error())
    if returned.verdict is Verdict.RETRYABLE:
        return retry(attempt, claim, returned.error(), None)
    attempt.succeeded = True
    return complete(attempt, claim, StoredResult.of(returned.body))


def _scheduled_if_recorded(ledger: Ledger, delivery: Delivery) -> Delivery:
    """A delivery that looks forced is the scheduled run if that run already has a record.

    A scheduled run's deliveries are sent at or after its time, so its record existing means the
    time has come by another instance's clock: this one's clock is behind, or this is a forced
    run's retry near the time. Taking it for the scheduled run never runs that run twice.
    """
    scheduled = dataclasses.replace(delivery, forced=False)
    if not ledger.exists(run_key(scheduled)):
        return delivery
    log(
        logging.WARNING,
        "ScheduleTime is ahead of this clock but the scheduled run already has a record: "
        "taking the delivery for the scheduled run",
    )
    return scheduled


def _handle(job: Callable[[Any], Any], request: Any, connection: Connection, attempt: Attempt) -> Answer:
    try:
        setup: Setup = connection.get()
    except ConfigError as exc:
        error = describe(exc)
        log(
            logging.ERROR,
            f"runonce is misconfigured: {error}",
            outcome=Outcome.MISCONFIGURED.label,
            latency_ms=attempt.ms(),
        )
        return Outcome.MISCONFIGURED.answer(error=error)
    trace = trace_fields(request.headers, setup.project)
    if trace:
        logs.bind(**trace)
    settings, ledger = setup.settings, setup.ledger
    now = clock.now()
    try:
        delivery = parse_delivery(request.headers, now, settings.forced_skew)
    except BadDelivery as exc:
        error = describe(exc, 1024)
        log(
            logging.WARNING,
            f"rejected delivery: {error}",
            outcome=Outcome.REJECTED.label,
            header=exc.header,
            latency_ms=attempt.ms(),
        )
        return Outcome.REJECTED.answer(error=error)
    key = run_key(delivery)
    fields = {
        "job": delivery.job,
        "schedule_time": delivery.schedule_time.rfc3339(),
        "forced": delivery.forced,
    }
    logs.bind(run_key=key, **fields)
    if delivery.schedule_time.utc < now - settings.retention:
        # Its record may already be gone (TTL), so a second run could not be told apart.
        log(
            logging.ERROR,
            "delivery older than the retention period; not running it",
            outcome=Outcome.TOO_OLD.label,
            latency_ms=attempt.ms(),
        )
        return Outcome.TOO_OLD.answer(run_key=key)
    attempt.ledger = ledger
    try:
        if delivery.forced:
            delivery = _scheduled_if_recorded(ledger, delivery)
            if not delivery.forced:
                key, fields["forced"] = run_key(delivery), False
                logs.bind(run_key=key, forced=False)
        claim = ledger.claim(key, {**fields, "project": delivery.project, "location": delivery.location})
    except (gexc.GoogleAPICallError, gexc.RetryError) as exc:
        return _claim_failed(exc, key, attempt)
    if isinstance(claim, Held):
        return _held_answer(claim, attempt)
    return _execute(job, request, attempt, claim, delivery)


def _claim_failed(exc: Exception, key: str, attempt: Attempt) -> Answer:
    """The claim could not be made; nothing ran. Unavailable, refused access, or something else."""
    problem = store_problem(exc)
    if isinstance(exc, gexc.PermissionDenied | gexc.Unauthenticated | gexc.NotFound):
        error = (
            f"the run ledger cannot be used: {problem}; check that the Firestore database "
            "(RUNONCE_DATABASE) exists and that the function's service account may use it "
            "(roles/datastore.user)"
        )
        outcome = Outcome.MISCONFIGURED
    elif isinstance(exc, (gexc.RetryError, *TRANSIENT)):
        error, outcome = f"the claim failed: {problem}", Outcome.STORE_UNAVAILABLE
    else:
        error, outcome = f"the claim failed: {problem}", Outcome.ERROR
    log(logging.ERROR, f"run not claimed: {error}", outcome=outcome.label, latency_ms=attempt.ms())
    return outcome.answer(run_key=key, error=error)


def _unexpected(exc: Exception, attempt: Attempt) -> Answer:
    """The outer guard: answer JSON, and give back (or complete) a claim this attempt still holds."""
    claim, ledger = attempt.claim, attempt.ledger
    if claim is not None and ledger is not None and not attempt.finished:
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


def _serve(job: Callable[[Any], Any], request: Any, connection: Connection) -> Answer:
    attempt = Attempt(time.monotonic())
    scope = logs.open_scope()
    try:
        return _handle(job, request, connection, attempt)
    except Exception as exc:
        return _unexpected(exc, attempt)
    finally:
        logs.close_scope(scope)


def deduplicated(
    func: Callable | None = None,
    *,
    lease: int | None = None,
    retention: int | None = None,
    collection: str | None = None,
    database: str | None = None,
    forced_skew: int | None = None,
    client: firestore.Client | None = None,
):
    """Run a functions-framework HTTP function at most once per scheduled run.

    Use bare (`@deduplicated`) or with options in seconds/names that override the RUNONCE_*
    environment variables; place it under `@functions_framework.http`. The function receives
    the Flask request, may call `current_run()`, and returns JSON-like data stored as the run's
    result, or a Flask-style status: a returned 5xx (or 408, 429) is retried like an exception,
    another 4xx fails permanently. Raise PermanentError for failures a retry cannot fix. `async
    def` and generator functions are refused (NotRunnable). `client` replaces the Firestore client
    built from the settings (its project and database then win).
    """
    overrides = {
        "lease": lease,
        "retention": retention,
        "collection": collection,
        "database": database,
        "forced_skew": forced_skew,
    }

    def decorate(job: Callable) -> Callable:
        refuse_unrunnable(job)
        connection = Connection(overrides, client)
        name = getattr(job, "__qualname__", None) or type_name(job)

        @functools.wraps(job)
        def handler(request: Any):
            refuse_nested(request, name)
            return _serve(job, request, connection)

        return handler

    return decorate(func) if func is not None else decorate
