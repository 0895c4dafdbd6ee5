"""The verdict on a job with a calendar (`Job.active`, `Job.exclude`; docs/stacks/schedules.md,
"Calendars"): each of its scheduled runs on an excluded date is answered 200 `excluded`, recorded
`excluded` with the reason, runs no body and has no effect; the watchdog reports none of them
missed.

Judged from the local Scheduler's journal (the answers), the ledger (the records), the instance
logs (bodies), the outbox (effects) and the counts of a watchdog tick after them.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from localscheduler.scheduler.journal import Sent
from runonce.contract import EXCLUDED_BECAUSE_FIELD


@dataclass(frozen=True)
class ExcludedRun:
    """One scheduled run on an excluded date."""

    schedule_time: datetime
    sent: list[Sent]
    record: dict[str, Any]
    bodies: int
    effects: int


@dataclass(frozen=True)
class ExclusionSeen:
    """The calendar job's runs and the watchdog's tick after them."""

    job: str
    because: str
    """Why its calendar excludes the runs (an `Excluded` value)."""
    runs: list[ExcludedRun]
    tick: dict[str, int]
    name: str = "calendar"

    @property
    def problems(self) -> list[str]:
        """Each way the calendar was not kept, in words."""
        found = [] if self.runs else [f"{self.job} had no run on an excluded date"]
        for run in self.runs:
            where = f"{self.job} {run.schedule_time:%H:%M}Z"
            if not any(s.status == 200 and s.outcome == "excluded" for s in run.sent):
                found.append(f"{where} was answered {[s.outcome for s in run.sent]}, not 200 excluded")
            if (
                run.record.get("status") != "excluded"
                or run.record.get(EXCLUDED_BECAUSE_FIELD) != self.because
            ):
                found.append(
                    f"{where} was recorded {run.record.get('status', 'nowhere')} "
                    f"({run.record.get(EXCLUDED_BECAUSE_FIELD)}), not excluded ({self.because})"
                )
            if run.bodies or run.effects:
                found.append(f"{where} was excluded yet ran {run.bodies} bodies, {run.effects} effects")
        if self.tick.get("missed") or self.tick.get("reported"):
            found.append(f"the watchdog found {self.tick}: it counted excluded ticks as missed")
        return found

    @property
    def ok(self) -> bool:
        return not self.problems

    def summary(self) -> str:
        """What happened, in a line."""
        answered = sum(any(s.outcome == "excluded" for s in run.sent) for run in self.runs)
        recorded = sum(run.record.get("status") == "excluded" for run in self.runs)
        return (
            f"{answered} answered 200 excluded, {recorded} recorded {self.because}, "
            f"{sum(r.bodies for r in self.runs)} bodies, {sum(r.effects for r in self.runs)} effects; "
            f"{self.tick.get('missed', 0)} missed"
        )
