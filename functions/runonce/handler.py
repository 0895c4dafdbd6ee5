"""`@deduplicated`: request -> delivery -> run key -> claim -> job -> finish -> response.

Status codes are chosen for Cloud Scheduler, which retries any non-2xx: 2xx when retrying would
be wrong (done, duplicate of a finished run, permanent failure), 409 while another attempt holds
the run, 500 when a retry should run the job, 400 for a request that is not a valid delivery.
Never 503, which the serving platform uses for its own overload.
"""

from __future__ import annotations

import contextvars
import functools
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from google.api_core import exceptions as gexc
from google.cloud import firestore

from . import clock
from .delivery import BadDelivery, Delivery, parse_delivery
from .errors import ConfigError, PermanentError
from .keys import run_key
from .ledger import Claim, Held, Ledger, RunStatus, storable
from .logs import log
from .settings import Settings, load_settings


@dataclass(frozen=True)
class Run:
    """The run the current job executes, as `current_run()` returns it."""

    key: str
    job: str
    schedule_time: str
    """Canonical RFC 3339 UTC form of the scheduled instant."""
    project: str
    location: str
    forced: bool
    attempt_id: str
    attempt: int


_current: contextvars.ContextVar[Run] = contextvars.ContextVar("runonce_current_run")


def current_run() -> Run:
    """The run being executed; only valid inside a `@deduplicated` function."""
    try:
        return _current.get()
    except LookupError:
        raise RuntimeError("current_run() is only available inside a @deduplicated function") from None


class _LedgerSource:
    """Builds the settings and ledger on first use and keeps them for the process."""

    def __init__(self, overrides: dict[str, Any], client: firestore.Client | None):
        self._overrides = overrides
        self._client = client
        self._lock = threading.Lock()
        self._value: tuple[Settings, Ledger] | None = None

    def get(self) -> tuple[Settings, Ledger]:
        with self._lock:
            if self._value is None:
                settings = load_settings(self._overrides)
                client = self._client or firestore.Client(
                    project=settings.project, database=settings.database
                )
                self._value = (
                    settings,
                    Ledger(client, settings.collection, settings.lease, settings.retention),
                )
            return self._value


def _answer(code: int, outcome: str, **body: Any) -> tuple[dict[str, Any], int]:
    return {"outcome": outcome, **body}, code


def _held_answer(held: Held, fields: dict[str, Any]) -> tuple[dict[str, Any], int]:
    if held.status is RunStatus.IN_PROGRESS:
        log(
            logging.INFO,
            "run in progress elsewhere; asking Scheduler to retry later",
            outcome="in_progress",
            **fields,
        )
        return _answer(409, "in_progress", run_key=held.key, lease_expires=str(held.lease_expires or ""))
    log(
        logging.INFO,
        f"duplicate delivery of a {held.status.value} run; not running",
        outcome="duplicate",
        **fields,
    )
    return _answer(
        200, "duplicate", run_key=held.key, status=held.status.value, result=held.result, error=held.error
    )


def _store_write(write: Callable[..., bool], *args: Any) -> bool:
    """A finishing write whose retries ran out reports False instead of failing the answer."""
    try:
        return write(*args)
    except (gexc.GoogleAPICallError, gexc.RetryError) as exc:
        log(logging.ERROR, f"run ledger write failed after retries: {exc}", outcome="store_unavailable")
        return False


def _execute(
    job: Callable,
    request: Any,
    ledger: Ledger,
    claim: Claim,
    delivery: Delivery,
    fields: dict[str, Any],
    started: float,
) -> tuple[dict[str, Any], int]:
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
    fields = {**fields, "attempt_id": claim.attempt_id, "attempt": claim.attempt}
    token = _current.set(run)
    try:
        result = job(request)
    except PermanentError as exc:
        recorded = _store_write(ledger.fail, claim, str(exc))
        log(
            logging.ERROR,
            f"job failed permanently: {exc}",
            outcome="failed",
            recorded=recorded,
            latency_ms=_ms(started),
            **fields,
        )
        return _answer(200, "failed", run_key=claim.key, error=str(exc), recorded=recorded)
    except Exception as exc:
        released = _store_write(ledger.release, claim)
        log(
            logging.ERROR,
            f"job failed, will be retried: {exc!r}",
            exc_info=True,
            outcome="retry",
            released=released,
            latency_ms=_ms(started),
            **fields,
        )
        return _answer(500, "retry", run_key=claim.key, error=type(exc).__name__)
    finally:
        _current.reset(token)
    recorded = _store_write(ledger.complete, claim, result)
    if recorded:
        log(logging.INFO, "run completed", outcome="completed", latency_ms=_ms(started), **fields)
    else:
        # The job did run; answering 2xx stops Scheduler from delivering it again.
        log(
            logging.ERROR,
            "run completed but its completion was not recorded (lease lost or store down)",
            outcome="completed",
            recorded=False,
            latency_ms=_ms(started),
            **fields,
        )
    return _answer(
        200, "completed", run_key=claim.key, attempt=claim.attempt, result=storable(result), recorded=recorded
    )


def _handle(job: Callable, request: Any, source: _LedgerSource) -> tuple[dict[str, Any], int]:
    started = time.monotonic()
    try:
        settings, ledger = source.get()
    except ConfigError as exc:
        log(logging.ERROR, f"runonce is misconfigured: {exc}", outcome="misconfigured")
        return _answer(500, "misconfigured", error=str(exc))
    now = clock.now()
    try:
        delivery = parse_delivery(request.headers, now, settings.forced_skew)
    except BadDelivery as exc:
        log(logging.WARNING, f"rejected delivery: {exc}", outcome="rejected", header=exc.header)
        return _answer(400, "rejected", error=str(exc))
    key = run_key(delivery)
    fields: dict[str, Any] = {
        "run_key": key,
        "job": delivery.job,
        "schedule_time": delivery.schedule_time.rfc3339(),
        "forced": delivery.forced,
    }
    if delivery.schedule_time.utc < now - settings.retention:
        # Its record may already be gone (TTL), so a second run could not be told apart.
        log(
            logging.ERROR,
            "delivery older than the retention period; not running it",
            outcome="too_old",
            **fields,
        )
        return _answer(200, "too_old", run_key=key)
    try:
        claim = ledger.claim(key, {**fields, "project": delivery.project, "location": delivery.location})
    except (gexc.GoogleAPICallError, gexc.RetryError) as exc:
        log(logging.ERROR, f"run ledger unavailable: {exc}", outcome="store_unavailable", **fields)
        return _answer(500, "store_unavailable", run_key=key)
    if isinstance(claim, Held):
        return _held_answer(claim, {**fields, "latency_ms": _ms(started)})
    return _execute(job, request, ledger, claim, delivery, fields, started)


def _ms(started: float) -> int:
    return int((time.monotonic() - started) * 1000)


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
    result. Raise PermanentError for failures a retry cannot fix. `client` replaces the Firestore
    client built from the settings (its project and database then win).
    """
    overrides = {
        "lease": lease,
        "retention": retention,
        "collection": collection,
        "database": database,
        "forced_skew": forced_skew,
    }

    def decorate(job: Callable) -> Callable:
        source = _LedgerSource(overrides, client)

        @functools.wraps(job)
        def handler(request: Any):
            return _handle(job, request, source)

        return handler

    return decorate(func) if func is not None else decorate
