"""`runonce resume`: start a Scheduler job the watchdog paused after it kept failing
(`Job.pause_after_failures`, docs/schedules/pause.md) again, through `jobs.resume`, and record who did it
and why in the team's ledger, under `resumed:<Scheduler job>:<when>` (`runonce show --key`)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from operate.rerun import Refused, SchedulerApi, Target
from runonce._instant import Instant
from runonce.core.errors import StoreError
from runonce.core.store import Claim, Store, StoredResult

RESUMED_PREFIX = "resumed:"
"""The key of a resume's record in the team's ledger: this, the Scheduler job, and when."""


@dataclass(frozen=True)
class Resumed:
    """What a resume did."""

    key: str
    """Its record's key in the team's ledger."""
    state: str
    """The Scheduler job's state as Scheduler answered (ENABLED)."""
    paused_since: str
    """When it had been paused (its `userUpdateTime` before the resume), "" if it was not."""


def resume(api: SchedulerApi, store: Store, target: Target, by: str, why: str, now: datetime) -> Resumed:
    """Resume `target`'s Scheduler job, refused (nothing changed) unless it is paused; then record
    who (`by`), why and when in the team's ledger. NotDispatched if Scheduler refused the resume;
    StoreError (the job was resumed) if the record could not be written."""
    before = api.job(target)
    if before.get("state") != "PAUSED":
        raise Refused(
            f"Scheduler job {target.scheduler_job} is {before.get('state') or 'in no known state'}, "
            "not PAUSED: nothing to resume"
        )
    after = api.resume(target)
    at = Instant(now.replace(microsecond=0), 0).rfc3339()
    key = f"{RESUMED_PREFIX}{target.scheduler_job}:{at}"
    fields: dict[str, Any] = {"job": target.scheduler_job, "action": "resume", "by": by}
    claim = store.claim(key, fields)
    if not isinstance(claim, Claim):
        raise StoreError(
            f"the job was resumed, but its record {key} exists already: resume again in a second"
        )
    paused_since = str(before.get("userUpdateTime", ""))
    record = {"by": by, "why": why, "at": at, "paused_since": paused_since, "job": target.job}
    if store.complete(claim, StoredResult.of(record)) is None:
        raise StoreError(f"the job was resumed, but its record {key} was not written")
    return Resumed(key, str(after.get("state", "")), paused_since)


__all__ = ["Resumed", "resume"]
