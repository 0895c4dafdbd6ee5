"""Starlette and FastAPI routes: Starlette's `Request` in, a `JSONResponse` out.

A route's endpoint takes the request (FastAPI: a parameter annotated `Request`); headers come
from `request.headers`, Starlette's case-insensitive `Headers` (Starlette's "Requests" page).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from ..core.host import Incoming, response_body
from ..core.outcomes import Answer

REQUEST_TYPE = Request
"""The type FastAPI must see on the endpoint's one parameter to pass the request itself."""


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
