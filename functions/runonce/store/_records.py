"""A run record's fields, written and read alike by every store here (the ledger and `memory`)."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from .._text import MAX_ERROR_CHARS, clip
from .._version import __version__
from ..contract import VERSION_FIELD, RunStatus
from ..core.store import Held, StoredResult


def lease_fields(attempt_id: str, now: datetime, lease: timedelta, retention: timedelta) -> dict[str, Any]:
    """What a claim writes: in progress for `attempt_id` until the lease ends, kept `retention`."""
    return {
        "status": RunStatus.IN_PROGRESS.value,
        VERSION_FIELD: __version__,  # the claim's and a take-over's: which code runs it
        "attempt_id": attempt_id,
        "lease_expires": now + lease,
        "expire_at": now + retention,
        "claimed_at": now,
    }


def finish_fields(
    status: RunStatus, fields: dict[str, Any], now: datetime, retention: timedelta
) -> dict[str, Any]:
    """What a finishing write (complete, fail) writes: `fields`, the status, the version of the code
    that finished it, and when."""
    return {
        **fields,
        "status": status.value,
        VERSION_FIELD: __version__,
        "finished_at": now,
        "expire_at": now + retention,
    }


def hold_fields(now: datetime, seconds: float, reason: str) -> dict[str, Any]:
    """What a hold writes: the lease extended `seconds` from now, and why."""
    return {
        "lease_expires": now + timedelta(seconds=seconds),
        "held_at": now,
        "held_reason": clip(reason, MAX_ERROR_CHARS),
    }


def held(key: str, status: RunStatus, record: dict[str, Any]) -> Held:
    """The run `record` describes as Held: its status, error, lease and (completed) stored result."""
    stored = StoredResult.from_record(record) if status is RunStatus.COMPLETED else None
    return Held(
        key,
        status,
        stored.value if stored is not None else None,
        record.get("error"),
        record.get("lease_expires"),
        stored,
    )
