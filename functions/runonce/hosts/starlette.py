"""Starlette and FastAPI routes: Starlette's `Request` in, a `JSONResponse` out, the store off the loop.

A route's endpoint takes the request (FastAPI: a parameter annotated `Request`); headers come
from `request.headers`, Starlette's case-insensitive `Headers` (Starlette's "Requests" page).
A delivery's whole path (claim, job, finish) runs in one of anyio's worker threads, where
Starlette and FastAPI run a plain `def` endpoint, so no store call waits on the event loop; an
`async def` job is sent back to the loop and awaited there, in the run's context, while its
worker thread waits (docs/library.md, "ASGI").
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable
from typing import Any

import anyio.from_thread
import anyio.to_thread
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from ..core.host import Incoming, response_body
from ..core.outcomes import Answer

Endpoint = Callable[[Request], Awaitable[JSONResponse]]

# FastAPI passes the request itself to a parameter annotated `Request` ("Using the Request Directly").
_SIGNATURE = inspect.Signature(
    [inspect.Parameter("request", inspect.Parameter.POSITIONAL_OR_KEYWORD, annotation=Request)]
)


def taking_the_request(endpoint: Endpoint) -> Endpoint:
    """`endpoint` with one parameter for FastAPI to see, `request: Request`, whatever the job's."""
    endpoint.__signature__ = _SIGNATURE  # type: ignore[attr-defined]
    return endpoint


def blocking(job: Callable[..., Any], awaited: bool) -> Callable[..., Any]:
    """`job` as a worker thread calls it: an `async def` job awaited on the event loop (in the
    calling thread's context), a `def` job called in the thread."""
    if not awaited:
        return job
    return lambda *arguments: anyio.from_thread.run(job, *arguments)


async def off_the_loop(answer: Callable[[], Answer]) -> JSONResponse:
    """The answer, computed in a worker thread, as a JSON response."""
    return respond(await anyio.to_thread.run_sync(answer))


def incoming(job: Callable[..., Any], arguments: tuple[Any, ...], keywords: dict[str, Any]) -> Incoming:
    """The route's request (`arguments[0]`, or FastAPI's `request` keyword) and its headers."""
    request = arguments[0] if arguments else keywords["request"]
    return Incoming(request.headers, request, lambda: job(*arguments, **keywords), read_response)


def read_response(value: Any) -> tuple[int, Any] | None:
    """A Starlette Response with its body in hand (not a stream): its status, and its JSON or text."""
    if not isinstance(value, Response) or not isinstance(getattr(value, "body", None), bytes):
        return None
    is_json = (value.media_type or "").split(";")[0].strip() == "application/json"
    return value.status_code, response_body(bytes(value.body).decode(value.charset, "replace"), is_json)


def respond(answer: Answer) -> JSONResponse:
    """The answer as a JSON response with its status."""
    return JSONResponse(answer.body, status_code=answer.status)
