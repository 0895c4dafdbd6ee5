"""A run's result as the ledger keeps it: JSON text, or the reason it was not kept.

Firestore refuses much that JSON allows (nested arrays, integers of 2^63 and more, map keys that
are empty, too long or shaped `__x__`, nesting deeper than 20, lone surrogates), so the result is
stored as ASCII JSON text, which it always accepts. The job's first answer and every later
duplicate are told the same value: the one the stored text decodes to.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import cached_property
from typing import Any

from .text import describe

# Larger results are not stored (a Firestore document holds at most 1 MiB).
MAX_RESULT_BYTES = 16 * 1024


@dataclass(frozen=True)
class StoredResult:
    """The result as stored: `text` (JSON), or None and `dropped` saying why it was not stored."""

    text: str | None
    dropped: str | None = None

    @classmethod
    def of(cls, value: Any) -> StoredResult:
        """Encode a job's result in one pass; anything JSON cannot hold is dropped, with the reason."""
        try:
            text = json.dumps(value, allow_nan=False, separators=(",", ":"))
        except Exception as exc:  # TypeError, ValueError, RecursionError, or whatever a value raises
            return cls(None, f"not JSON: {describe(exc, 300)}")
        # ensure_ascii (the default) makes the text ASCII: its length is its size in bytes.
        if len(text) > MAX_RESULT_BYTES:
            return cls(None, f"{len(text)} bytes of JSON, more than the {MAX_RESULT_BYTES} stored")
        return cls(text)

    @classmethod
    def not_stored(cls, reason: str) -> StoredResult:
        """No result kept, for `reason`."""
        return cls(None, reason)

    @classmethod
    def from_record(cls, record: dict[str, Any]) -> StoredResult:
        """The result a ledger record holds (records written before JSON text kept the value itself)."""
        if "result_json" in record:
            return cls(record["result_json"])
        if record.get("result_stored") is False:
            return cls(None, record.get("result_dropped") or "not stored")
        return cls(json.dumps(record.get("result"), default=str))

    @cached_property
    def value(self) -> Any:
        """The stored value (None when nothing is stored), decoded once."""
        return None if self.text is None else json.loads(self.text)

    def fields(self) -> dict[str, Any]:
        """The record fields that hold this result."""
        if self.text is None:
            return {"result_stored": False, "result_dropped": self.dropped}
        return {"result_json": self.text, "result_stored": True}

    def answer(self) -> dict[str, Any]:
        """The answer fields that tell this result: `result`, and why it is missing if it is."""
        if self.text is None:
            return {"result": None, "result_stored": False, "result_dropped": self.dropped}
        return {"result": self.value}
