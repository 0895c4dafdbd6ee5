"""A run record's fields, written and read alike by every store here (the ledger and `memory`)."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime, timedelta
from typing import Any

from .._text import MAX_ERROR_CHARS, clip
from .._version import __version__
from ..contract import ACTIONS_FIELD, CLAIMED_AT_FIELD, VERSION_FIELD, RunStatus
from ..core.store import Decision, Held, Refusal, StoredResult


def lease_fields(attempt_id: str, now: datetime, lease: timedelta, retention: timedelta) -> dict[str, Any]:
    """What a claim writes: in progress for `attempt_id` until the lease ends, kept `retention`."""
    return {
        "status": RunStatus.IN_PROGRESS.value,
        VERSION_FIELD: __version__,  # the claim's and a take-over's: which code runs it
        "attempt_id": attempt_id,
        "lease_expires": now + lease,
        "expire_at": now + retention,
        CLAIMED_AT_FIELD: now,
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


def with_action(record: Mapping[str, Any] | None, action: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The record's operator actions with `action` appended (the record keeps the whole list)."""
    return [*((record or {}).get(ACTIONS_FIELD) or []), dict(action)]


def release_decision(attempt_id: str, action: Mapping[str, Any], force: bool, now: datetime) -> Decision:
    """`Store.release_held`'s change: the lease ends `now` if `attempt_id` still holds the run."""

    def decide(record: dict[str, Any] | None) -> dict[str, Any] | Refusal:
        if record is None:
            return Refusal.NO_RECORD
        if record.get("status") != RunStatus.IN_PROGRESS.value:
            return Refusal.NOT_IN_PROGRESS
        if record.get("attempt_id") != attempt_id:
            return Refusal.TAKEN_OVER
        if not force and record["lease_expires"] > now:
            return Refusal.LEASE_LIVE
        return {"lease_expires": now, ACTIONS_FIELD: with_action(record, action)}

    return decide
