"""What every change the command makes leaves behind: an entry in the record's
`operator_actions` (who, when, what) and one JSON line on stderr (stdout stays the answer).
"""

from __future__ import annotations

import json
import sys
from datetime import UTC, datetime
from typing import Any

from runonce import _clock as clock
from runonce._version import __version__
from runonce.contract import ACTIONS_FIELD

LOGGER = "runonce.operate"
"""The `logger` field of the command's log lines."""


def entry(action: str, by: str, detail: dict[str, Any]) -> dict[str, Any]:
    """One `operator_actions` entry: {"action", "by", "at", "detail"}."""
    return {"action": action, "by": by, "at": clock.now().astimezone(UTC), "detail": detail}


def log_change(message: str, action: dict[str, Any], **fields: Any) -> None:
    """Write the change's JSON line (Cloud Logging's shape: severity, message) to stderr."""
    line = {
        "severity": "NOTICE",
        "message": message,
        "logger": LOGGER,
        "runonce_version": __version__,
        **{name: value for name, value in action.items() if name != "detail"},
        **action.get("detail", {}),
        **fields,
    }
    print(json.dumps(line, default=_text), file=sys.stderr)


def _text(value: Any) -> str:
    return value.isoformat() if isinstance(value, datetime) else str(value)


def appended(record: dict[str, Any] | None, action: dict[str, Any]) -> list[dict[str, Any]]:
    """The record's `operator_actions` with `action` at the end (the store writes the whole list)."""
    return [*((record or {}).get(ACTIONS_FIELD) or []), action]
