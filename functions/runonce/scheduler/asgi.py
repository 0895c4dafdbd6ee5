"""`@deduplicated` for FastAPI and Starlette routes: `async def` and `def` jobs on an event loop.

The store is the same synchronous store as on every other host, called off the event loop, and
an `async def` job is awaited on the loop (`runonce.hosts.starlette`): the loop keeps serving
other requests while a job awaits or a store call is on the wire. docs/library.md ("ASGI")
gives the measurement. The endpoint has one parameter, `request: Request`, for FastAPI.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, overload

from .._text import type_name
from ..contract import Overlap
from ..core.finish import refuse_unrunnable
from ..core.handler import serve
from ..core.run import refuse_nested
from ..hosts import starlette as host
from ..hosts.starlette import Endpoint
from ..store.connection import Connection
from .adapter import handle

if TYPE_CHECKING:
    from google.cloud import firestore
    from starlette.requests import Request
    from starlette.responses import JSONResponse

Job = Callable[["Request"], Any]


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
    store: str | None = None,
    forced_skew: int | None = None,
    overlap: Overlap | str | None = None,
    client: firestore.Client | None = None,
) -> Callable[[Job], Endpoint]: ...


def deduplicated(
    func: Job | None = None,
    *,
    lease: int | None = None,
    retention: int | None = None,
    collection: str | None = None,
    database: str | None = None,
    store: str | None = None,
    forced_skew: int | None = None,
    overlap: Overlap | str | None = None,
    client: firestore.Client | None = None,
) -> Any:
    """Run a FastAPI or Starlette route at most once per scheduled run: `runonce.deduplicated`'s
    guarantee, answers, records and log lines, for `async def` and `def` jobs alike.

    Place it under the route's decorator (`@app.post("/jobs/close")`). The job receives
    Starlette's `Request`, may call `current_run()`, and returns JSON-like data, a Starlette
    response, or a Flask-style `(body, status)`, read as `runonce.deduplicated` reads them. The
    handler is an `async def` endpoint taking `request: Request`; it answers a `JSONResponse`.
    Generator functions are refused (NotRunnable). `overlap` is the job's overlap policy, as
    for `runonce.deduplicated` (docs/schedules/overlap.md), and so is `store`, the run store.
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

    def wrap(job: Job) -> Endpoint:
        name = str(getattr(job, "__qualname__", None) or type_name(job))
        call = host.blocking(job, refuse_unrunnable(job, awaited=True))
        connection = Connection(overrides, client)

        @functools.wraps(job)
        async def endpoint(request: Request) -> JSONResponse:
            refuse_nested(request, name)
            incoming = host.incoming(call, (request,), {})
            return await host.off_the_loop(
                lambda: serve(lambda attempt: handle(incoming, connection, attempt))
            )

        return host.taking_the_request(endpoint)

    return wrap(func) if func is not None else wrap
