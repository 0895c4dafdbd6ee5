"""`@deduplicated_event` for FastAPI and Starlette routes: Pub/Sub push and CloudEvents over HTTP.

The route receives the push envelope or the CloudEvent (CloudEvents' HTTP binding, as Eventarc
sends it to a Cloud Run service) and answers by status, as `runonce.events.adapter.answer_http`
does for a Flask view. The body is read on the event loop; the rest of the delivery runs off
it, an `async def` job awaited on it (`runonce.hosts.starlette`). The endpoint has one
parameter, `request: Request`, for FastAPI.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, overload

from .._text import type_name
from ..core.event import Event
from ..core.finish import refuse_unrunnable
from ..core.run import refuse_nested
from ..hosts import starlette as host
from ..hosts.starlette import Endpoint
from . import adapter

if TYPE_CHECKING:
    from google.cloud import firestore
    from starlette.requests import Request
    from starlette.responses import JSONResponse

Job = Callable[[Event], Any]


@overload
def deduplicated_event(func: Job) -> Endpoint: ...


@overload
def deduplicated_event(
    func: None = None,
    *,
    lease: int | None = None,
    retention: int | None = None,
    collection: str | None = None,
    database: str | None = None,
    store: str | None = None,
    max_event_age: int | None = None,
    dead_letter_topic: str | None = None,
    consumer: str | None = None,
    job: str | None = None,
    client: firestore.Client | None = None,
) -> Callable[[Job], Endpoint]: ...


def deduplicated_event(
    func: Job | None = None,
    *,
    lease: int | None = None,
    retention: int | None = None,
    collection: str | None = None,
    database: str | None = None,
    store: str | None = None,
    max_event_age: int | None = None,
    dead_letter_topic: str | None = None,
    consumer: str | None = None,
    job: str | None = None,
    client: firestore.Client | None = None,
) -> Any:
    """Run a FastAPI or Starlette route's event job exactly once per event: `runonce.deduplicated_event`'s
    guarantee, answers, records, dead letters and log lines, for `async def` and `def` jobs alike.

    Place it under the route's decorator; the job receives an `Event`. The route is a Pub/Sub push
    subscription's endpoint, or Eventarc's for a Cloud Run service (a CloudEvent over HTTP, read by
    the cloudevents SDK's `from_http`; the consumer defaults to K_SERVICE, the service's name).
    Generator functions are refused (NotRunnable). `store` is the run store, as for
    `runonce.deduplicated_event`.
    """
    overrides = {
        "lease": lease,
        "retention": retention,
        "collection": collection,
        "database": database,
        "store": store,
        "max_event_age": max_event_age,
        "dead_letter_topic": dead_letter_topic,
        "consumer": consumer,
        "job": job,
    }

    def wrap(function: Job) -> Endpoint:
        name = str(getattr(function, "__qualname__", None) or type_name(function))
        call = host.blocking(function, refuse_unrunnable(function, awaited=True))
        connection = adapter.EventConnection(overrides, client)

        @functools.wraps(function)
        async def endpoint(request: Request) -> JSONResponse:
            refuse_nested(request, name)
            body = await request.body()
            return await host.off_the_loop(
                lambda: adapter.answer_http(
                    call, connection, request.headers, lambda: body, request, overrides
                )
            )

        return host.taking_the_request(endpoint)

    return wrap(func) if func is not None else wrap
