"""`@deduplicated`, the Cloud Scheduler adapter: headers -> run key -> the core -> answer.

It reads a Scheduler delivery from the request's headers, decides what the core cannot (a
delivery too old to deduplicate, a forced run whose scheduled twin already has a record), and
hands the rest to `runonce.core.handler.run_once`. The request comes from the job's web framework
through its host module (`runonce.hosts`), picked by what the view is called with and loaded at
its first use; the host turns the core's answer into its framework's response.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any, ParamSpec, Protocol, TypeVar, overload

from .. import _clock as clock
from .. import _logs as logs
from .._instant import parse_instant
from .._logs import log
from .._trace import trace_fields
from .._version import __version__
from ..contract import (
    CLAIMED_AT_FIELD,
    EXCLUDED_BECAUSE_FIELD,
    EXPIRE_AT_FIELD,
    STATUS_FIELD,
    VERSION_FIELD,
    Excluded,
    Overlap,
    RunStatus,
)
from ..core.decoration import decorate
from ..core.errors import ConfigError, StoreError
from ..core.finish import Attempt
from ..core.handler import claim_failed, misconfigured, rejected, run_once, serve
from ..core.occurrence import Occurrence
from ..core.outcomes import Answer, Outcome
from ..core.run import Run
from ..core.store import Claim, Done, JobLock, Previous, Refusal, Store
from ..store.connection import Connection
from .delivery import BadDelivery, Delivery, job_overlap, parse_delivery
from .exclusion import job_calendar
from .keys import completions, job_lock, rerun_slot, run_key

if TYPE_CHECKING:  # types only: a scheduled function's cold start creates none of them
    from google.cloud import firestore
    from werkzeug.wrappers import Request

    from ..core.host import Incoming

    # The view's parameters, as its framework calls it: the request (functions-framework, Django),
    # URL values (Flask, Django); the handler answers in its framework's response type, an
    # `Answer` for functions-framework's werkzeug request.
    _View = ParamSpec("_View")
    _Werkzeug = TypeVar("_Werkzeug", bound=Request)

    class _Decorator(Protocol):
        @overload
        def __call__(self, func: Callable[[_Werkzeug], object]) -> Callable[[_Werkzeug], Answer]: ...

        @overload
        def __call__(self, func: Callable[_View, object]) -> Callable[_View, Any]: ...


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


_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def _order(delivery: Delivery) -> int:
    """The schedule time in microseconds since the epoch: the run's place in its job's completions."""
    instant = delivery.schedule_time
    whole = instant.utc.replace(microsecond=0) - _EPOCH
    return whole // timedelta(microseconds=1) + instant.nanos // 1000


def _occurrence(delivery: Delivery, key: str, store: Store) -> Occurrence:
    schedule_time = delivery.schedule_time.rfc3339()
    fields = {
        "job": delivery.job,
        "schedule_time": schedule_time,
        "forced": delivery.forced,
        "project": delivery.project,
        "location": delivery.location,
    }

    index = completions(delivery.project, delivery.location, delivery.job)
    order = _order(delivery)

    @functools.cache
    def previous() -> Previous | None:
        return store.previous(index, order)

    def run(claim: Claim) -> Run:
        return Run(
            key=claim.key,
            job=delivery.job,
            schedule_time=schedule_time,
            project=delivery.project,
            location=delivery.location,
            forced=delivery.forced,
            attempt_id=claim.attempt_id,
            attempt=claim.attempt,
            lookup=previous,
        )

    lock = None
    if delivery.overlap is not Overlap.ALLOW:
        lock = JobLock(job_lock(delivery.project, delivery.location, delivery.job), delivery.overlap)
    # A forced run is not entered: its time is the next scheduled run's, or the moment it was forced.
    done = None if delivery.forced else Done(index, order, schedule_time)
    return Occurrence(key, fields, run, lock=lock, done=done)


def handle(request: Incoming, connection: Connection, attempt: Attempt) -> Answer:
    """One delivery, whatever framework carried it: the answer, with an outcome."""
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
    try:
        delivery = delivery._replace(overlap=job_overlap(request.headers, settings.overlap))
        calendar = job_calendar(request.headers)
    except ConfigError as exc:
        return misconfigured(exc, attempt)
    if delivery.schedule_time.utc < now - settings.retention:
        # Its record may already be gone (TTL), so a second run could not be told apart.
        log(
            logging.ERROR,
            "delivery older than the retention period; not running it",
            outcome=Outcome.TOO_OLD.label,
            latency_ms=attempt.ms(),
        )
        return Outcome.TOO_OLD.answer(run_key=key)
    # A forced run is an operator's choice (or a re-run): the calendar excludes scheduled runs only.
    scheduled = calendar is not None and not delivery.forced
    because = calendar.excluded_because(delivery.schedule_time.utc) if scheduled and calendar else None
    if because is not None:
        return _excluded(store, delivery, key, because, settings.retention, attempt)
    if delivery.forced:
        try:
            delivery = _scheduled_if_recorded(store, delivery)
        except StoreError as exc:
            return claim_failed(exc, key, attempt)
        if not delivery.forced:
            key = run_key(delivery)
            logs.bind(run_key=key, forced=False)
        else:
            return _forced(request, store, delivery, key, attempt)
    return _run_once(store, _occurrence(delivery, key, store), request, attempt)


def _excluded(
    store: Store, delivery: Delivery, key: str, because: Excluded, retention: timedelta, attempt: Attempt
) -> Answer:
    """A scheduled run the job's calendar excludes: recorded `excluded` (where it has no record yet,
    in one store call), never run, answered 200 so Scheduler does not retry it."""
    now = clock.now()
    record = {
        **_occurrence(delivery, key, store).fields,
        STATUS_FIELD: RunStatus.EXCLUDED.value,
        EXCLUDED_BECAUSE_FIELD: because.value,
        VERSION_FIELD: __version__,
        "attempts": 0,
        CLAIMED_AT_FIELD: now,
        "finished_at": now,
        EXPIRE_AT_FIELD: now + retention,
    }
    try:
        store.amend(key, lambda existing: record if existing is None else Refusal.RECORDED)
    except StoreError as exc:
        return claim_failed(exc, key, attempt)
    attempt.answer_line(
        logging.INFO,
        f"the job's calendar excludes this run ({because.value}): recorded excluded, not run",
        outcome=Outcome.EXCLUDED.label,
        excluded_because=because.value,
    )
    return Outcome.EXCLUDED.answer(run_key=key, excluded_because=because.value)


def _run_once(
    store: Store, occurrence: Occurrence, request: Incoming, attempt: Attempt, claimed: Claim | None = None
) -> Answer:
    return run_once(store, occurrence, request.call, attempt, request.carrier, claimed, request.read_response)


def _forced(request: Incoming, store: Store, delivery: Delivery, key: str, attempt: Attempt) -> Answer:
    """A forced delivery: the re-run an operator requested of this job (docs/rerun.md), when a
    request is pending or an earlier delivery with these headers consumed one; else the forced run.

    The re-run is answered as its run is (`completed`, `failed`, `in_progress`, `duplicate`...),
    with `run_key` the re-run run's and `rerun_delivery` this delivery's own key.
    """
    occurrence = _occurrence(delivery, key, store)
    slot = rerun_slot(delivery.project, delivery.location, delivery.job)
    try:
        rerun = store.take_rerun(slot, key, occurrence.fields)
    except StoreError as exc:
        return claim_failed(exc, key, attempt)
    if rerun is None:
        return _run_once(store, occurrence, request, attempt)
    # Held by this attempt from here on: the outer guard gives the claim back if anything raises.
    attempt.store, attempt.claim = store, rerun.claim
    target = delivery._replace(schedule_time=parse_instant(rerun.schedule_time), forced=False)
    logs.bind(
        run_key=rerun.key,
        schedule_time=rerun.schedule_time,
        forced=False,
        rerun_delivery=key,
        cause=rerun.cause,
    )
    log(
        logging.INFO,
        "forced delivery carries an operator's re-run"
        + (": request consumed, run reopened" if rerun.claim is not None else " (a later delivery of it)"),
    )
    run = _occurrence(target, rerun.key, store)
    answer = _run_once(store, run, request, attempt, rerun.claim)
    return Answer({**answer.body, "rerun_delivery": key}, answer.status)


def _respond(job: Callable[..., Any], connection: Connection, *arguments: Any, **keywords: Any) -> Any:
    from ..hosts import host_of  # at the first delivery: decorating loads no host (cold start)

    host = host_of(arguments)
    request: Incoming = host.incoming(job, arguments, keywords)
    return host.respond(serve(lambda attempt: handle(request, connection, attempt)))


@overload
def deduplicated(func: Callable[[_Werkzeug], object]) -> Callable[[_Werkzeug], Answer]: ...


@overload
def deduplicated(func: Callable[_View, object]) -> Callable[_View, Any]: ...


@overload
def deduplicated(
    func: None = None,
    *,
    lease: int | None = None,
    retention: int | None = None,
    collection: str | None = None,
    database: str | None = None,
    store: str | None = None,
    forced_skew: int | None = None,
    overlap: Overlap | str | None = None,
    client: firestore.Client | None = None,
) -> _Decorator: ...


def deduplicated(
    func: Callable[[Any], object] | None = None,
    *,
    lease: int | None = None,
    retention: int | None = None,
    collection: str | None = None,
    database: str | None = None,
    store: str | None = None,
    forced_skew: int | None = None,
    overlap: Overlap | str | None = None,
    client: firestore.Client | None = None,
) -> Callable[..., Any]:
    """Run a scheduled HTTP function or view at most once per scheduled run.

    Use bare (`@deduplicated`) or with options in seconds/names that override the RUNONCE_*
    environment variables; place it under `@functions_framework.http`, a Flask route or as a
    Django view (docs/library.md, "Hosts"; FastAPI and Starlette: `runonce.scheduler.asgi`). The
    function is called as its framework calls a view (the request; a Flask view its URL values),
    may call `current_run()`, and returns JSON-like data stored as the run's result, its
    framework's response, or a Flask-style status: a returned 5xx (or 408, 429) is retried like
    an exception, another 4xx fails permanently. Raise PermanentError for failures a retry cannot
    fix. `async def` and generator functions are refused (NotRunnable). `client` replaces the
    Firestore client built from the settings (its project and database then win). `overlap`
    (`allow`, `skip` or `wait`) is the job's overlap policy when no stack sends it in the
    X-Runonce-Overlap header (docs/schedules/overlap.md). `store` names the run store as RUNONCE_STORE does
    (`firestore`, or a Valkey server's URL); both set and different is answered `misconfigured`.
    """
    overrides = {
        "lease": lease,
        "retention": retention,
        "collection": collection,
        "database": database,
        "store": store,
        "forced_skew": forced_skew,
        "overlap": overlap,
    }
    return decorate(func, lambda: Connection(overrides, client), _respond)
