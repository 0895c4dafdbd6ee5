"""Django views: the view's `HttpRequest` in, a `JsonResponse` out.

Django calls a view with the request first, then the URL's values; the job is called the same
way. Headers come from `request.headers`, Django's case-insensitive mapping of the HTTP headers
(Django's "Request and response objects": `HttpRequest.headers`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.http import HttpResponse, JsonResponse

from ..core.host import Incoming, response_body
from ..core.outcomes import Answer


def request_of(arguments: tuple[Any, ...]) -> Any:
    """The view's request: Django passes it first."""
    return arguments[0]


def body_of(request: Any) -> bytes:
    """The request's raw body (`HttpRequest.body`)."""
    return bytes(request.body)


def incoming(job: Callable[..., Any], arguments: tuple[Any, ...], keywords: dict[str, Any]) -> Incoming:
    """The view's request (`arguments[0]`) and its headers; the job gets the view's arguments."""
    request = arguments[0]
    return Incoming(request.headers, request, lambda: job(*arguments, **keywords), read_response)


def read_response(value: Any) -> tuple[int, Any] | None:
    """A Django HttpResponse a job returned: its status, and its JSON or text."""
    if not isinstance(value, HttpResponse):
        return None
    is_json = value.headers.get("Content-Type", "").split(";")[0].strip() == "application/json"
    return value.status_code, response_body(value.content.decode(value.charset, "replace"), is_json)


def respond(answer: Answer) -> JsonResponse:
    """The answer as a JSON response with its status."""
    return JsonResponse(answer.body, status=answer.status)
