"""The verdict on a job paused after it kept failing (`Job.pause_after_failures`, docs/watchdog.md):
every run of the job fails for good; the watchdog, ticking after each failed run, pauses the
Scheduler job exactly once, at the tick after the N-th failed run and not before; a later tick
reports none of the paused job's ticks as missed; `runonce resume` resumes it and its record says
who and why; a tick after the resume does not pause it again for the failures before it.

Judged from the ledger (the runs, the resume's record), the Scheduler stand-in (the `jobs.pause`
calls it received, the job's state) and the counts each watchdog tick returned.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any


@dataclass(frozen=True)
class Tick:
    """One watchdog tick: when (simulated) and what `check` returned."""

    at: datetime
    counts: dict[str, int]
    failed_before: int
    """How many of the job's runs had failed by then."""


@dataclass(frozen=True)
class PauseSeen:
    """The failing job's runs, the watchdog's ticks, the pause and the resume."""

    job: str
    after: int
    """Its `pause_after_failures`."""
    statuses: list[str]
    """Each run's ledger status, in schedule order ("" without a record)."""
    ticks: list[Tick]
    """The ticks while its runs fail, in order (two at once after the N-th failed run)."""
    pauses: int
    """`jobs.pause` calls the Scheduler received for it."""
    late: dict[str, int]
    """The tick after its later ticks passed unrun (it was paused)."""
    resumed: dict[str, Any]
    """The result `runonce resume` recorded ({}: none)."""
    state: str
    """The Scheduler job's state after the resume."""
    after_resume: dict[str, int] = field(default_factory=dict)
    """A tick after the resume."""
    by: str = ""
    why: str = ""
    """Who resumed it and why, as the operator said."""
    name: str = "pause"

    @property
    def problems(self) -> list[str]:
        """Each way the pause or the resume went wrong, in words."""
        found = [
            f"{self.job} run {n} ended {status or 'without a record'}, not failed"
            for n, status in enumerate(self.statuses, 1)
            if status != "failed"
        ]
        early = [tick for tick in self.ticks if tick.failed_before < self.after and tick.counts.get("paused")]
        for tick in early:
            found.append(
                f"a tick at {tick.at:%H:%M:%S}Z paused {self.job} after {tick.failed_before} failed runs"
            )
        due = sum(tick.counts.get("paused", 0) for tick in self.ticks if tick.failed_before >= self.after)
        if due != 1:
            found.append(f"the ticks after {self.after} failed runs paused {self.job} {due} times, not once")
        if self.pauses != 1:
            found.append(f"Scheduler received {self.pauses} jobs.pause calls for {self.job}, not 1")
        if self.late.get("missed") or self.late.get("reported"):
            found.append(
                f"a tick while {self.job} was paused found {self.late}: its ticks were reported missed"
            )
        if self.resumed.get("by") != self.by or self.resumed.get("why") != self.why:
            found.append(f"runonce resume recorded {self.resumed or 'nothing'}, not who ({self.by}) and why")
        if self.state != "ENABLED":
            found.append(f"{self.job} is {self.state or 'in no state'} after runonce resume, not ENABLED")
        if self.after_resume.get("paused"):
            found.append(f"a tick after the resume paused {self.job} again for the failures before it")
        return found

    @property
    def ok(self) -> bool:
        return not self.problems

    def summary(self) -> str:
        """What happened, in a line."""
        at = next((t for t in self.ticks if t.counts.get("paused")), None)
        when = f"at {at.at:%H:%M:%S}Z after {at.failed_before} failed" if at else "never"
        return (
            f"{self.statuses.count('failed')} failed; {self.pauses} jobs.pause, {when}; "
            f"{self.late.get('reported', 0)} reported while paused; resumed by {self.resumed.get('by', '-')}"
        )
