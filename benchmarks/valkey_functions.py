"""The Powertools-pattern functions `benchmarks.valkey_endtoend` serves beside runonce's on
Valkey, each from its own functions-framework process: the same bodies as
benchmarks.endtoend_functions and endtoend_event_functions, claimed and completed with
`benchmarks.valkey_pattern.PowertoolsPattern` on the server BENCH_VALKEY_PORT names (a scheduled
run keyed by its job name and ScheduleTime headers, an event by its message id).
"""

from __future__ import annotations

import os
from datetime import timedelta
from typing import Any

import functions_framework
import valkey

from benchmarks.endtoend_functions import job_body
from benchmarks.valkey_pattern import PowertoolsPattern

_pattern: PowertoolsPattern | None = None


def _claimed(key: str) -> PowertoolsPattern | None:
    global _pattern
    if _pattern is None:
        client = valkey.Valkey(port=int(os.environ["BENCH_VALKEY_PORT"]), decode_responses=True)
        _pattern = PowertoolsPattern(client, timedelta(days=7), timedelta(minutes=10))
    return _pattern if _pattern.claim(key) else None


def _answer(key: str, body: Any) -> Any:
    pattern = _claimed(key)
    if pattern is None:
        return {"outcome": "duplicate"}, 409
    result = body()
    pattern.complete(key, result)
    return {"outcome": "completed", "result": result}


@functions_framework.http
def scheduled_pattern(request):
    """The scheduled job's body behind the pattern."""
    key = (
        request.headers.get("X-CloudScheduler-JobName", "")
        + "/"
        + request.headers.get("X-CloudScheduler-ScheduleTime", "")
    )
    return _answer(key, lambda: job_body(request))


@functions_framework.http
def push_pattern(request):
    """The event body behind the pattern, keyed by the push envelope's message id."""
    message_id = request.get_json()["message"]["messageId"]
    return _answer(f"event/{message_id}", lambda: {"stored": message_id})
