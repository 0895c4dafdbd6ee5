"""`@deduplicated_event`, the event adapters: a Pub/Sub push request or a CloudEvent -> the core.

Both shapes become one `Event` and one run key (subscription + messageId, or the consumer + the
CloudEvent's source + id) and go through `runonce.core.handler.run_once` like a scheduled run. What events add
is the end: an event that failed permanently, or arrived older than the maximum event age
(recorded failed, never run), is forwarded to the dead-letter topic BEFORE it is acknowledged, and
if that forwarding fails it is not acknowledged, so Pub/Sub keeps it. A duplicate of a failed
event whose copy never reached the dead-letter topic is forwarded then.

Push: the core's answer is the HTTP answer (see `runonce.core.outcomes`; only 200 acknowledges on both the
service and the emulator). CloudEvent: returning acknowledges, raising `EventRetry` redelivers.
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, Protocol, overload

from .. import _clock as clock
from .. import _logs as logs
from .._logs import log
from .._text import describe
from .._trace import trace_fields
from ..contract import (
    DEAD_LETTER_FAILED_AT_FIELD,
    DEAD_LETTER_FORM_FIELD,
    DEAD_LETTER_MESSAGE_ID_FIELD,
    DEAD_LETTER_REASON_FIELD,
    DEAD_LETTERED_AT_FIELD,
    MAX_EVENT_AGE_VARIABLE,
    DeadLetterReason,
    RunStatus,
)
from ..core.decoration import decorate
from ..core.errors import ConfigError, EventRetry, StoreError
from ..core.event import Event, EventRun, EventSettings, job_label, load_event_settings
from ..core.finish import Attempt
from ..core.handler import claim_failed, misconfigured, rejected, run_once, serve
from ..core.occurrence import Occurrence
from ..core.outcomes import Answer, Outcome
from ..core.store import Claim
from ..hosts.flask import read_response
from ..store.connection import Connection, Setup
from .deadletter import DeadLetterFailed, DeadLetters, publisher_client
from .parse import (
    BadEnvelope,
    event_key,
    from_cloud_event,
    from_http_request,
    is_cloud_event_request,
    parse_push,
)

if TYPE_CHECKING:
    # Both types through packages a deployed function already requires (the stacks' requirement
    # check counts these imports too): cloudevents' CloudEvent as functions-framework passes it,
    # werkzeug's Request, which Flask's request is.
    from functions_framework import CloudEvent
    from google.cloud import firestore
    from werkzeug.wrappers import Request

    # What functions-framework calls the decorated function with, and what it gets back: a push
    # request is answered (body, status); a CloudEvent's function returns the body or raises.
    Delivered = Request | CloudEvent

    class Handled(Protocol):
        """The decorated job: functions-framework calls it with the request or the CloudEvent;
        Flask calls it as a view, with the route's URL values only (the job takes the Event)."""

        @overload
        def __call__(self, request: Delivered, /) -> Answer | dict[str, Any]: ...

        @overload
        def __call__(self, **view_args: Any) -> Any: ...


# The recorded error of an event that was too old to run starts with this, so a duplicate of it
# is dead-lettered for the right reason.
TOO_OLD_ERROR = "too old: "


@dataclass(frozen=True)
class EventSetup:
    """What an event request needs: the scheduled path's setup, the event settings, the forwarder."""

    base: Setup
    settings: EventSettings
    dead_letters: DeadLetters


class EventConnection:
    """Builds the event setup on first use (ConfigError until it can be built) and keeps it."""

    def __init__(self, overrides: dict[str, Any], client: firestore.Client | None):
        self._overrides = overrides
        self._connection = Connection(overrides, client)
        self._lock = threading.Lock()
        self._setup: EventSetup | None = None

    def get(self) -> EventSetup:
        """The setup; ConfigError if a setting is invalid or Pub/Sub cannot be used."""
        setup = self._setup
        if setup is not None:
            return setup
        with self._lock:
            if self._setup is None:
                base = self._connection.get()
                settings = load_event_settings(base.settings, self._overrides, project=base.project)
                self._setup = EventSetup(
                    base, settings, DeadLetters(settings.dead_letter_topic, publisher_client())
                )
            return self._setup


def _occurrence(event: Event, key: str, expired: str | None, consumer: str) -> Occurrence:
    fields = {
        "event_kind": event.kind,
        "event_source": event.source,
        "event_id": event.id,
        "event_time": event.time,
    }
    if event.kind == "cloudevent":
        fields["event_consumer"] = consumer

    def run(claim: Claim) -> EventRun:
        return EventRun(
            key=claim.key, event=event, consumer=consumer, attempt_id=claim.attempt_id, attempt=claim.attempt
        )

    return Occurrence(key, fields, run, expired)


def _expired(event: Event, settings: EventSettings) -> str | None:
    """Why the event is too old to run, or None (an event without a time is never too old)."""
    if event.time is None:
        return None
    age = clock.now() - event.time
    if age <= settings.max_event_age:
        return None
    return (
        f"{TOO_OLD_ERROR}the event is {int(age.total_seconds())} s old, more than "
        f"{MAX_EVENT_AGE_VARIABLE} ({int(settings.max_event_age.total_seconds())} s); it was not run"
    )


def _answer_instead(attempt: Attempt, level: int, message: str, outcome: Outcome, **fields: Any) -> None:
    """Answer the delivery with `outcome` on this line: the core's held answering line is written
    first as a step (one line per delivery carries `latency_ms`, and it carries the outcome answered)."""
    attempt.settle(answering=False)
    log(level, message, outcome=outcome.label, **fields, latency_ms=attempt.ms())


def _forward(
    setup: EventSetup,
    event: Event,
    key: str,
    reason: DeadLetterReason,
    number: int,
    answer: Answer,
    attempt: Attempt,
) -> Answer:
    """Forward the event, mark its record, and acknowledge; or refuse to acknowledge."""
    error = str(answer.body.get("error") or "")
    try:
        forwarded = setup.dead_letters.forward(event, reason, key, number, error)
    except DeadLetterFailed as exc:
        problem = describe(exc, 1024)
        # Says no forwarder is at work any more, so the redelivery may forward at once.
        with contextlib.suppress(Exception):
            setup.base.store.annotate(key, {DEAD_LETTER_FAILED_AT_FIELD: clock.now()})
        _answer_instead(
            attempt,
            logging.ERROR,
            f"event not dead-lettered, so not acknowledged: {problem}",
            Outcome.DEAD_LETTER_FAILED,
            reason=reason.value,
        )
        return Outcome.DEAD_LETTER_FAILED.answer(run_key=key, reason=reason.value, error=problem)
    attempt.settle(answering=True)  # the answer stands: the copy is safe
    message_id = forwarded.message_id
    marks = {
        DEAD_LETTERED_AT_FIELD: clock.now(),
        DEAD_LETTER_REASON_FIELD: reason.value,
        DEAD_LETTER_MESSAGE_ID_FIELD: message_id,
        DEAD_LETTER_FORM_FIELD: forwarded.form.value,
    }
    try:
        setup.base.store.annotate(key, marks)
    except Exception as exc:  # the copy is safe; only a later duplicate would forward it again
        log(logging.WARNING, f"dead-lettered but not marked in the ledger: {describe(exc, 500)}")
    log(
        logging.ERROR,
        f"event dead-lettered to {setup.dead_letters.topic} ({reason.value})",
        outcome=answer.outcome.label,
        dead_letter_message_id=message_id,
        dead_letter_form=forwarded.form.value,
    )
    return Answer({**answer.body, "dead_lettered": True, "dead_letter_message_id": message_id}, answer.status)


def _forwarding_elsewhere(record: dict[str, Any], lease: timedelta) -> bool:
    """The attempt that recorded this failure may still be forwarding its copy: it finished less
    than a lease ago and has neither marked the copy sent nor recorded that sending it failed.
    A duplicate then waits (409) instead of publishing a second copy alongside it."""
    if record.get(DEAD_LETTER_FAILED_AT_FIELD) is not None:
        return False
    finished = record.get("finished_at")
    return isinstance(finished, datetime) and finished + lease > clock.now()


def _finish_event(setup: EventSetup, event: Event, key: str, attempt: Attempt, answer: Answer) -> Answer:
    """The core's answer, once a failed or too old event is safely in the dead-letter topic.

    The core's answering line of a failure or a duplicate is held (`Attempt.defer`) until the
    answer is known: it answers when the answer stands, and is a step before the line that
    answers when the answer changes."""
    outcome = answer.outcome
    if outcome in (Outcome.FAILED, Outcome.TOO_OLD) and answer.body.get("recorded") is False:
        # Another attempt may hold the run now (it took it over), or the store failed: a copy could
        # be a second ending, and an ack could leave that attempt's run with no delivery left.
        _answer_instead(
            attempt,
            logging.WARNING,
            "failure not recorded, so neither dead-lettered nor acknowledged; a redelivery finds how it ends",
            Outcome.IN_PROGRESS,
        )
        return Outcome.IN_PROGRESS.answer(run_key=key, recorded=False, error=answer.body.get("error"))
    if outcome in (Outcome.FAILED, Outcome.TOO_OLD):
        reason = (
            DeadLetterReason.TOO_OLD if outcome is Outcome.TOO_OLD else DeadLetterReason.PERMANENT_FAILURE
        )
        number = attempt.claim.attempt if attempt.claim is not None else 0
        return _forward(setup, event, key, reason, number, answer, attempt)
    if outcome is not Outcome.DUPLICATE or answer.body.get("status") != RunStatus.FAILED.value:
        return answer
    try:
        record = setup.base.store.read(key) or {}
    except StoreError as exc:
        attempt.settle(answering=False)
        return claim_failed(exc, key, attempt)
    if record.get(DEAD_LETTERED_AT_FIELD) is not None:
        return answer
    if _forwarding_elsewhere(record, setup.base.settings.lease):
        _answer_instead(
            attempt,
            logging.INFO,
            "failed event not yet marked dead-lettered; its forwarder may still be at work",
            Outcome.IN_PROGRESS,
        )
        return Outcome.IN_PROGRESS.answer(run_key=key, forwarding=True)
    too_old = str(record.get("error") or "").startswith(TOO_OLD_ERROR)
    reason = DeadLetterReason.TOO_OLD if too_old else DeadLetterReason.PERMANENT_FAILURE
    return _forward(setup, event, key, reason, int(record.get("attempts") or 0), answer, attempt)


def _handle_event(
    job: Callable[[Event], Any],
    read: Callable[[], Event],
    carrier: Any,
    headers: Mapping[str, str],
    connection: EventConnection,
    overrides: Mapping[str, Any],
    attempt: Attempt,
) -> Answer:
    try:
        setup = connection.get()
    except ConfigError as exc:
        logs.bind(job=job_label(overrides))
        return misconfigured(exc, attempt)
    logs.bind(job=setup.settings.job, **trace_fields(headers, setup.base.project))
    try:
        event = read()
    except BadEnvelope as exc:
        return rejected(exc, "event", "field", attempt)
    consumer = setup.settings.consumer
    key = event_key(event, consumer)
    logs.bind(run_key=key, event_id=event.id, event_source=event.source, event_kind=event.kind)
    occurrence = _occurrence(event, key, _expired(event, setup.settings), consumer)
    attempt.defer = True  # a failure's or a duplicate's answer may change once forwarded
    answer = run_once(
        setup.base.store, occurrence, lambda: job(event), attempt, carrier, read_response=read_response
    )
    return _finish_event(setup, event, key, attempt, answer)


def _is_cloud_event(argument: Any) -> bool:
    return callable(getattr(argument, "get_attributes", None)) and hasattr(argument, "data")


def answer_http(
    job: Callable[[Event], Any],
    connection: EventConnection,
    headers: Mapping[str, str],
    body: Callable[[], bytes],
    carrier: Any,
    overrides: Mapping[str, Any],
) -> Answer:
    """An event over HTTP, answered by its status: a Pub/Sub push envelope, or a CloudEvent in
    CloudEvents' HTTP binding (Eventarc to a Cloud Run service)."""
    if is_cloud_event_request(headers):
        read = lambda: from_http_request(headers, body())  # noqa: E731
    else:
        read = lambda: parse_push(body())  # noqa: E731
    return serve(lambda attempt: _handle_event(job, read, carrier, headers, connection, overrides, attempt))


def _respond(
    job: Callable[[Event], Any],
    connection: EventConnection,
    arguments: tuple[Any, ...],
    overrides: Mapping[str, Any],
) -> Any:
    """A request's answer (functions-framework's http, a Flask or Django view) in its host's response
    type, or a CloudEvent's result (EventRetry to have it delivered again)."""
    if not (arguments and _is_cloud_event(arguments[0])):
        from ..hosts import host_of  # at the first request: decorating loads no host (cold start)

        host = host_of(arguments)
        request = host.request_of(arguments)
        answer = answer_http(
            job, connection, request.headers, lambda: host.body_of(request), request, overrides
        )
        return host.respond(answer)
    argument = arguments[0]
    answer = serve(
        lambda attempt: _handle_event(
            job, lambda: from_cloud_event(argument), argument, {}, connection, overrides, attempt
        )
    )
    if answer.status >= 300:  # a CloudEvent is delivered again only if the function raises
        raise EventRetry(f"{answer.outcome.label}: {answer.body.get('error', '')}", answer)
    return answer.body


@overload
def deduplicated_event(func: Callable[[Event], object]) -> Handled: ...


@overload
def deduplicated_event(
    func: None = None,
    *,
    lease: int | None = None,
    retention: int | None = None,
    collection: str | None = None,
    database: str | None = None,
    max_event_age: int | None = None,
    dead_letter_topic: str | None = None,
    consumer: str | None = None,
    job: str | None = None,
    client: firestore.Client | None = None,
) -> Callable[[Callable[[Event], object]], Handled]: ...


def deduplicated_event(
    func: Callable[[Event], object] | None = None,
    *,
    lease: int | None = None,
    retention: int | None = None,
    collection: str | None = None,
    database: str | None = None,
    max_event_age: int | None = None,
    dead_letter_topic: str | None = None,
    consumer: str | None = None,
    job: str | None = None,
    client: firestore.Client | None = None,
) -> Callable[..., Any]:
    """Run an event function exactly once per event: `def handle(event)` receives an `Event`.

    Place it under `@functions_framework.http`, a Flask route or a Django view for a Pub/Sub push subscription
    (the request body is the push envelope; the key is subscription + messageId) or for
    CloudEvents over HTTP (Eventarc to a Cloud Run service: read by the cloudevents SDK's
    `from_http`), or under `@functions_framework.cloud_event` for a CloudEvent (the key is
    `consumer` + source + id; the consumer defaults to K_SERVICE, the function's Cloud Run
    service). `job` names the job on every log line (default RUNONCE_JOB, which the stack sets,
    else the consumer). Use bare or with options (seconds and names) that override the RUNONCE_*
    variables. FastAPI and Starlette: `runonce.events.asgi.deduplicated_event`. The job may call
    `current_run()` (an `EventRun`: the key, the attempt, the event and the consumer) and
    returns JSON-like data stored as the result.
    `PermanentError`, and an event older than `max_event_age`, are recorded failed and forwarded
    to `dead_letter_topic` (required) before the event is acknowledged; any other exception
    releases the claim and has the event delivered again. `client` replaces the Firestore client.
    """
    overrides = {
        "lease": lease,
        "retention": retention,
        "collection": collection,
        "database": database,
        "max_event_age": max_event_age,
        "dead_letter_topic": dead_letter_topic,
        "consumer": consumer,
        "job": job,
    }
    return decorate(
        func,
        lambda: EventConnection(overrides, client),
        # A Flask view's URL values are not the job's: it takes the Event.
        lambda function, connection, *arguments, **_: _respond(function, connection, arguments, overrides),
    )
