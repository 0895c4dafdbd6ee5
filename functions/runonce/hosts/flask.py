"""functions-framework and Flask views: werkzeug's request in, the answer as Flask sends a tuple.

functions-framework calls the job with the request; a Flask view is called with its URL values
only, and the request is Flask's context-local `flask.request`. Flask turns the `Answer`, a
(dict, status) tuple, into a JSON response (Flask's "About Responses": a dict becomes JSON, a
tuple's second item is the status), so the answer goes back as it is.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any

from werkzeug.wrappers import Response

from ..core.host import Incoming, response_body
from ..core.outcomes import Answer


def request_of(arguments: tuple[Any, ...]) -> Any:
    """The request functions-framework passed, or (a Flask view, called with URL values only)
    Flask's request of this context."""
    if arguments:
        return arguments[0]
    # Flask is calling the view, so it is installed; a function on functions-framework never
    # comes here, and its requirements need no pin of Flask for it.
    return importlib.import_module("flask").request


def body_of(request: Any) -> bytes:
    """The request's raw body (werkzeug's `Request.get_data`)."""
    return bytes(request.get_data())


def incoming(job: Callable[..., Any], arguments: tuple[Any, ...], keywords: dict[str, Any]) -> Incoming:
    """The request functions-framework passed, or a Flask view's (its URL values as keywords)."""
    request = request_of(arguments)
    return Incoming(request.headers, request, lambda: job(*arguments, **keywords), read_response)


def read_response(value: Any) -> tuple[int, Any] | None:
    """A werkzeug (Flask) Response a job returned: its status, and its JSON or text."""
    if not isinstance(value, Response):
        return None
    return value.status_code, response_body(value.get_data(as_text=True), value.is_json)


def respond(answer: Answer) -> Answer:
    """The answer as it is: Flask sends a (dict, status) tuple as JSON with that status."""
    return answer
