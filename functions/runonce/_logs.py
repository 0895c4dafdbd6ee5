"""One JSON object per line on stdout, in the shape Cloud Logging reads as a structured entry.

Fields bound for a request (`open_scope`, `bind`: its trace, then its run key and job) go on
every line written while it is handled, so no line about a run lacks them; every line names the
library's version (`runonce_version`). A line never exceeds
`MAX_LINE_BYTES`, well under Cloud Logging's 256 KB entry limit: long fields are cut, with a marker.

Written with the standard library on purpose: the deployed function depends only on
functions-framework and google-cloud-firestore.
"""

from __future__ import annotations

import contextvars
import json
import logging
import sys
from typing import Any

from ._text import clip
from ._version import __version__
from .contract import VERSION_FIELD

logger = logging.getLogger("runonce")

MAX_LINE_BYTES = 200_000
_FIELD_CAPS = (8192, 1024, 128)

_bound: contextvars.ContextVar[dict[str, Any]] = contextvars.ContextVar("runonce_log_fields")
_NOTHING: dict[str, Any] = {}  # never changed: bound fields are replaced, not updated
# What `logging` records as a line's origin when it does not look it up (`logging._srcfile = None`).
_NO_CALLER = ("(unknown file)", 0, "(unknown function)")


def _fallback(value: object) -> str:
    try:
        return str(value)
    except Exception:
        return "<unprintable>"


# json.dumps(entry, default=_fallback) builds this encoder anew for every line.
_ENCODER = json.JSONEncoder(default=_fallback)


def _encode(entry: dict[str, Any]) -> str:
    # ASCII output (ensure_ascii): its length is its size in bytes.
    return _ENCODER.encode(entry)


class CloudLoggingFormatter(logging.Formatter):
    """Format a record as {"severity", "message", "logger", "runonce_version", ...fields} with
    `extra={"fields": {...}}`."""

    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, Any] = {"severity": record.levelname, "message": record.getMessage()}
        entry["logger"] = record.name
        entry[VERSION_FIELD] = __version__
        entry.update(getattr(record, "fields", {}))
        if record.exc_info:
            entry["stack_trace"] = self.formatException(record.exc_info)
        line = _encode(entry)
        for cap in _FIELD_CAPS:
            if len(line) <= MAX_LINE_BYTES:
                break
            entry = {key: _cut(value, cap) for key, value in entry.items()}
            line = _encode(entry)
        return line


def _cut(value: Any, cap: int) -> Any:
    return clip(value, cap) if isinstance(value, str) else value


class _StdoutHandler(logging.StreamHandler):
    """Writes to whatever sys.stdout is when the line is written, not when the handler was made."""

    @property
    def stream(self):
        return sys.stdout

    @stream.setter
    def stream(self, value):
        pass


def _install() -> None:
    if not logger.handlers:
        handler = _StdoutHandler()
        handler.setFormatter(CloudLoggingFormatter())
        logger.addHandler(handler)
        logger.setLevel(logging.INFO)
        logger.propagate = False


def open_scope() -> contextvars.Token[dict[str, Any]]:
    """Start a scope (one request's): fields bound in it are dropped by `close_scope`."""
    return _bound.set(_bound.get(_NOTHING))


def close_scope(token: contextvars.Token[dict[str, Any]]) -> None:
    """Drop the fields bound since `open_scope`."""
    _bound.reset(token)


def bind(**fields: Any) -> None:
    """Put `fields` on every later line of the current scope (and of threads given its context)."""
    _bound.set({**_bound.get(_NOTHING), **fields})


def log(level: int, message: str, exc_info: bool = False, **fields: object) -> None:
    """Write one structured line; `fields` become top-level keys (run_key, job, outcome, ...)."""
    _install()
    _write(logger, level, message, exc_info, {**_bound.get(_NOTHING), **fields})


def log_as(name: str, level: int, message: str, **fields: object) -> None:
    """Write one structured line as `name` (a logger under runonce's, its `logger` field) with
    `fields` alone: the line is about something other than the request being handled, so the
    request's bound fields (its run key, job, attempt) stay off it."""
    _install()
    _write(logging.getLogger(name), level, message, False, fields)


def _write(target: logging.Logger, level: int, message: str, exc_info: bool, fields: dict[str, Any]) -> None:
    """`target.log(level, message, exc_info=exc_info, extra={"fields": fields})` without looking up
    the caller's frame (about 15% of a line's cost): it would always find this module, and no line
    shows it. The record goes through the logger's level, filters and handlers as `log` sends it."""
    if not target.isEnabledFor(level):
        return
    record = target.makeRecord(
        target.name,
        level,
        _NO_CALLER[0],
        _NO_CALLER[1],
        message,
        (),
        sys.exc_info() if exc_info else None,
        _NO_CALLER[2],
        {"fields": fields},
    )
    target.handle(record)
