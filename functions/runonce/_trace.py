"""The request's trace, as the log fields Cloud Logging groups a request's lines by.

Read from `traceparent` (W3C) or `X-Cloud-Trace-Context` (`TRACE_ID/SPAN_ID;o=1`, the span id in
decimal); Cloud Logging wants `projects/PROJECT/traces/TRACE_ID` and a 16-hex-digit span id.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

TRACE_FIELD = "logging.googleapis.com/trace"
SPAN_FIELD = "logging.googleapis.com/spanId"
SAMPLED_FIELD = "logging.googleapis.com/trace_sampled"

_TRACEPARENT = re.compile(r"^[0-9a-f]{2}-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})$")
_CLOUD_TRACE = re.compile(r"^([0-9a-fA-F]{32})(?:/([0-9]{1,20}))?(?:;o=([0-9]+))?$")


def trace_fields(headers: Mapping[str, str], project: str | None) -> dict[str, Any]:
    """The trace fields for every log line of this request; empty without a trace or a project."""
    if not project:
        return {}
    traceparent, cloud_trace = _header(headers, "traceparent"), _header(headers, "X-Cloud-Trace-Context")
    if not (traceparent or cloud_trace):
        return {}
    parsed = _traceparent(traceparent) or _cloud_trace(cloud_trace)
    if parsed is None:
        return {}
    trace, span, sampled = parsed
    fields: dict[str, Any] = {TRACE_FIELD: f"projects/{project}/traces/{trace}", SAMPLED_FIELD: sampled}
    if span:
        fields[SPAN_FIELD] = span
    return fields


def _header(headers: Mapping[str, str], name: str) -> str:
    value = headers.get(name)  # Flask's headers ignore case; a plain mapping needs this spelling
    return value.strip() if isinstance(value, str) else ""


def _traceparent(value: str) -> tuple[str, str, bool] | None:
    match = _TRACEPARENT.match(value)
    if match is None or match.group(1) == "0" * 32 or match.group(2) == "0" * 16:
        return None
    return match.group(1), match.group(2), bool(int(match.group(3), 16) & 1)


def _cloud_trace(value: str) -> tuple[str, str, bool] | None:
    match = _CLOUD_TRACE.match(value)
    if match is None or int(match.group(1), 16) == 0:
        return None
    span = int(match.group(2) or 0)
    span_hex = f"{span:016x}" if 0 < span < 2**64 else ""
    return match.group(1).lower(), span_hex, match.group(3) == "1"
