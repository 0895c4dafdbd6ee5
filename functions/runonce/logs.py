"""One JSON object per line on stdout, in the shape Cloud Logging reads as a structured entry.

Written with the standard library on purpose: the deployed function depends only on
functions-framework and google-cloud-firestore.
"""

from __future__ import annotations

import json
import logging
import sys

logger = logging.getLogger("runonce")


class CloudLoggingFormatter(logging.Formatter):
    """Format a record as {"severity", "message", "logger", ...fields} with `extra={"fields": {...}}`."""

    def format(self, record: logging.LogRecord) -> str:
        entry = {"severity": record.levelname, "message": record.getMessage(), "logger": record.name}
        entry.update(getattr(record, "fields", {}))
        if record.exc_info:
            entry["stack_trace"] = self.formatException(record.exc_info)
        return json.dumps(entry, default=str)


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


def log(level: int, message: str, exc_info: bool = False, **fields: object) -> None:
    """Write one structured line; `fields` become top-level keys (run_key, job, outcome, ...)."""
    _install()
    logger.log(level, message, exc_info=exc_info, extra={"fields": fields})
