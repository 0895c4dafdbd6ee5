"""`@deduplicated` for FastAPI and Starlette routes: `async def` and `def` jobs on an event loop.

The store is the same synchronous store as on every other host, called off the event loop: one
delivery's whole path (claim, job, finish) runs in a worker thread of anyio, the thread pool
where Starlette and FastAPI run a plain `def` endpoint, so a `def` job runs where the framework
runs sync code. An `async def` job is awaited on the event loop itself (`anyio.from_thread.run`),
in the run's context, while its worker thread waits: the loop keeps serving other requests while a
job awaits or a store call is on the wire. docs/library.md ("ASGI") gives the measurement.

FastAPI reads an endpoint's parameters from its signature: the handler has one, `request`,
annotated with Starlette's `Request`, which FastAPI passes as the request itself.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, overload

import anyio.from_thread
import anyio.to_thread

from .._text import type_name
from ..core.finish import refuse_unrunnable
from ..core.handler import serve
from ..core.run import refuse_nested
from ..hosts import starlette as host
from ..store.connection import Connection
from .adapter import handle

if TYPE_CHECKING:
    from google.cloud import firestore
    from starlette.requests import Request
    from starlette.responses import JSONResponse

Job = Callable[["Request"], Any]
Endpoint = Callable[["Request"], Awaitable["JSONResponse"]]


@overload
def deduplicated(func: Job) -> Endpoint: ...


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
) -> Callable[[Job], Endpoint]: ...


def deduplicated(
    func: Job | None = None,
    *,
    lease: int | None = None,
    retention: int | None = None,
    collection: str | None = None,
    database: str | None = None,
    forced_skew: int | None = None,
    client: firestore.Client | None = None,
) -> Any:
    """Run a FastAPI or Starlette route at most once per scheduled run: `runonce.deduplicated`'s
    guarantee, answers, records and log lines, for `async def` and `def` jobs alike.

    Place it under the route's decorator (`@app.post("/jobs/close")`). The job receives
    Starlette's `Request`, may call `current_run()`, and returns JSON-like data, a Starlette
    response, or a Flask-style `(body, status)`, read as `runonce.deduplicated` reads them. The
    handler is an `async def` endpoint taking `request: Request`; it answers a `JSONResponse`.
    Generator functions are refused (NotRunnable).
    """
    overrides = {
        "lease": lease,
        "retention": retention,
        "collection": collection,
        "database": database,
        "forced_skew": forced_skew,
    }

    def wrap(job: Job) -> Endpoint:
        name = str(getattr(job, "__qualname__", None) or type_name(job))
        awaited = refuse_unrunnable(job, awaited=True)
        connection = Connection(overrides, client)

        def call(request: Request) -> Any:
            if awaited:
                return anyio.from_thread.run(job, request)  # on the loop, in this thread's context
            return job(request)

        @functools.wraps(job)
        async def endpoint(request: Request) -> JSONResponse:
            refuse_nested(request, name)
            incoming = host.incoming(call, (request,), {})
            answer = await anyio.to_thread.run_sync(
                functools.partial(serve, lambda attempt: handle(incoming, connection, attempt))
            )
            return host.respond(answer)

        parameter = inspect.Parameter(
            "request", inspect.Parameter.POSITIONAL_OR_KEYWORD, annotation=host.REQUEST_TYPE
        )
        endpoint.__signature__ = inspect.Signature(  # type: ignore[attr-defined]
            [parameter], return_annotation=inspect.Signature.empty
        )
        return endpoint

    return wrap(func) if func is not None else wrap
