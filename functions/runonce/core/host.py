"""The seam between runonce and the web framework that serves a job (its "host").

A host module (`runonce.hosts.flask`, `.django`, `.starlette`) reads its framework's request into
an `Incoming` and turns the core's `Answer` (status and JSON body) into its framework's response;
the core and the adapters see only these two. Framework types never reach this package.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any, NamedTuple

ResponseReader = Callable[[Any], "tuple[int, Any] | None"]
"""Reads a response object of the host's framework, as a job may return it: (status, body), the
body JSON-decoded when the response says it is JSON; None if the value is no such response."""


def response_body(text: str, is_json: bool) -> Any:
    """A response's body as a run's result: its JSON if the response says it is JSON, else its text."""
    if is_json:
        try:
            return json.loads(text)
        except ValueError:
            pass
    return text


class Incoming(NamedTuple):
    """One request, as every adapter reads it, whatever framework carried it."""

    headers: Mapping[str, str]
    """The request's headers; looking one up ignores the case of its name."""
    carrier: Any
    """What the job runs for (the framework's request): a nested decorated call with it is refused."""
    call: Callable[[], Any]
    """The job, called as its framework calls a view (the request, URL arguments)."""
    read_response: ResponseReader
