"""`@deduplicated`, the Cloud Scheduler adapter: headers -> run key -> the core -> answer.

It reads a Scheduler delivery from the request's headers, decides what the core cannot (a
delivery too old to deduplicate, a forced run whose scheduled twin already has a record), and
hands the rest to `runonce.core.handler.run_once`; the core's answer goes back to Scheduler as it is.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar, overload

from .. import _clock as clock
from .. import _logs as logs
from .._instant import parse_instant
from .._logs import log
from .._trace import trace_fields
from ..core.decoration import decorate
from ..core.errors import ConfigError, StoreError
from ..core.finish import Attempt
from ..core.handler import claim_failed, misconfigured, rejected, run_once, serve
from ..core.occurrence import Occurrence
from ..core.outcomes import Answer, Outcome
from ..core.run import Run
from ..core.store import Claim, Store
from ..store.connection import Connection
from .delivery import BadDelivery, Delivery, parse_delivery
from .keys import rerun_slot, run_key

if TYPE_CHECKING:
    from google.cloud import firestore

# The job's one positional parameter, the request, as functions-framework calls it: a ParamSpec
# would also let mypy accept keyword calls and extra parameters the handler does not take.
_Request = TypeVar("_Request")


def _scheduled_if_recorded(store: Store, delivery: Delivery) -> Delivery:
    """A delivery that looks forced is the scheduled run if that run already has a record.

    A scheduled run's deliveries are sent at or after its time, so its record existing means the
    time has come by another instance's clock: this one's clock is behind, or this is a forced
    run's retry near the time. Taking it for the scheduled run never runs that run twice.
    """
    scheduled = delivery._replace(forced=False)
    if not store.exists(run_key(scheduled)):
        return delivery
    log(
        logging.WARNING,
        "ScheduleTime is ahead of this clock but the scheduled run already has a record: "
        "taking the delivery for the scheduled run",
    )
    return scheduled


def _occurrence(delivery: Delivery, key: str) -> Occurrence:
    fields = {
        "job": delivery.job,
        "schedule_time": delivery.schedule_time.rfc3339(),
        "forced": delivery.forced,
        "project": delivery.project,
        "location": delivery.location,
    }

    def run(claim: Claim) -> Run:
        return Run(
            key=claim.key,
            job=delivery.job,
            schedule_time=delivery.schedule_time.rfc3339(),
            project=delivery.project,
            location=delivery.location,
            forced=delivery.forced,
            attempt_id=claim.attempt_id,
            attempt=claim.attempt,
        )

    return Occurrence(key, fields, run)


def _handle(job: Callable[[Any], Any], request: Any, connection: Connection, attempt: Attempt) -> Answer:
    try:
        setup = connection.get()
    except ConfigError as exc:
        return misconfigured(exc, attempt)
    trace = trace_fields(request.headers, setup.project)
    if trace:
        logs.bind(**trace)
    settings, store = setup.settings, setup.store
    now = clock.now()
    try:
        delivery = parse_delivery(request.headers, now, settings.forced_skew)
    except BadDelivery as exc:
        return rejected(exc, "delivery", "header", attempt)
    key = run_key(delivery)
    logs.bind(
        run_key=key, job=delivery.job, schedule_time=delivery.schedule_time.rfc3339(), forced=delivery.forced
    )
    if delivery.schedule_time.utc < now - settings.retention:
        # Its record may already be gone (TTL), so a second run could not be told apart.
        log(
            logging.ERROR,
            "delivery older than the retention period; not running it",
            outcome=Outcome.TOO_OLD.label,
            latency_ms=attempt.ms(),
        )
        return Outcome.TOO_OLD.answer(run_key=key)
    if delivery.forced:
        try:
            delivery = _scheduled_if_recorded(store, delivery)
        except StoreError as exc:
            return claim_failed(exc, key, attempt)
        if not delivery.forced:
            key = run_key(delivery)
            logs.bind(run_key=key, forced=False)
        else:
            return _forced(job, request, store, delivery, key, attempt)
    return run_once(store, _occurrence(delivery, key), lambda: job(request), attempt, request)


def _forced(
    job: Callable[[Any], Any], request: Any, store: Store, delivery: Delivery, key: str, attempt: Attempt
) -> Answer:
    """A forced delivery: the re-run an operator requested of this job (docs/rerun.md), when a
    request is pending or an earlier delivery with these headers consumed one; else the forced run.

    The re-run is answered as its run is (`completed`, `failed`, `in_progress`, `duplicate`...),
    with `run_key` the re-run run's and `rerun_delivery` this delivery's own key.
    """
    occurrence = _occurrence(delivery, key)
    slot = rerun_slot(delivery.project, delivery.location, delivery.job)
    try:
        rerun = store.take_rerun(slot, key, occurrence.fields)
    except StoreError as exc:
        return claim_failed(exc, key, attempt)
    if rerun is None:
        return run_once(store, occurrence, lambda: job(request), attempt, request)
    # Held by this attempt from here on: the outer guard gives the claim back if anything raises.
    attempt.store, attempt.claim = store, rerun.claim
    target = delivery._replace(schedule_time=parse_instant(rerun.schedule_time), forced=False)
    logs.bind(run_key=rerun.key, schedule_time=rerun.schedule_time, forced=False, rerun_delivery=key)
    log(
        logging.INFO,
        "forced delivery carries an operator's re-run"
        + (": request consumed, run reopened" if rerun.claim is not None else " (a later delivery of it)"),
    )
    run = _occurrence(target, rerun.key)
    answer = run_once(store, run, lambda: job(request), attempt, request, rerun.claim)
    return Answer({**answer.body, "rerun_delivery": key}, answer.status)


def _respond(job: Callable[[Any], Any], connection: Connection, request: Any) -> Answer:
    return serve(lambda attempt: _handle(job, request, connection, attempt))


@overload
def deduplicated(func: Callable[[_Request], object]) -> Callable[[_Request], Answer]: ...


@overload
def deduplicated(
    func: None = None,
    *,
    lease: int | None = None,
    retention: int | None = None,
    collection: str | None = None,
    database: str | None = None,
    forced_skew: int | None = None,
    client: firestore.Client | None = None,
) -> Callable[[Callable[[_Request], object]], Callable[[_Request], Answer]]: ...


def deduplicated(
    func: Callable[[Any], object] | None = None,
    *,
    lease: int | None = None,
    retention: int | None = None,
    collection: str | None = None,
    database: str | None = None,
    forced_skew: int | None = None,
    client: firestore.Client | None = None,
) -> Callable[..., Any]:
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
    return decorate(func, lambda: Connection(overrides, client), _respond)
