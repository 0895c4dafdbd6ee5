"""The verdict on an incremental job (functions/sync): each run copies the window from its previous
completed run's cursor (`current_run().previous`, docs/library.md "The previous run") to its own
schedule time, and records the copy in an outbox document named by the window.

Judged from the ledger (each run's status and the `since`/`until` its job returned), the outbox
(every copy, with the run that made it) and the local Scheduler's journal (the faults that hit
the runs): every run completed; the completed windows chain from the job's start with no gap and
no overlap; every window was copied exactly once and nothing else was; and the faults did hit (a
lost answer and a killed instance), so the chain held under them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from localscheduler.scheduler.faults import Fault
from localscheduler.scheduler.journal import Sent
from runonce._instant import parse_instant
from runonce.core.store import StoredResult


@dataclass(frozen=True)
class WindowRun:
    """One scheduled run of the incremental job."""

    schedule_time: datetime
    key: str
    record: dict[str, Any]
    """Its ledger record ({}: none)."""
    sent: list[Sent] = field(default_factory=list)
    """The local Scheduler's deliveries of it."""

    @property
    def result(self) -> Any:
        """What its job returned, as the record keeps it (None: not kept, or no record)."""
        return StoredResult.from_record(self.record).value if self.record else None


@dataclass(frozen=True)
class Copy:
    """One outbox document: the window [since, until) and the run that copied it."""

    since: datetime
    until: datetime
    run_key: str


def _instant(text: Any) -> datetime | None:
    try:
        return parse_instant(str(text)).utc
    except ValueError:
        return None


@dataclass(frozen=True)
class WindowsSeen:
    """The incremental job's runs, their windows and the copies in its outbox."""

    job: str
    start: datetime
    """Where its first window starts (its SYNC_START)."""
    runs: list[WindowRun]
    copies: list[Copy]
    name: str = "previous"

    @property
    def lost(self) -> int:
        """Attempts whose 2xx Scheduler never saw (the lost-answer fault)."""
        return sum(s.fault == Fault.LOST_RESPONSE.value for run in self.runs for s in run.sent)

    @property
    def killed(self) -> int:
        """Attempts whose instance died under them."""
        return sum(s.killed for run in self.runs for s in run.sent)

    def windows(self) -> list[tuple[str, datetime | None, datetime | None]]:
        """Each completed run's window as its job returned it: (run key, since, until)."""
        done = sorted(
            (run for run in self.runs if run.record.get("status") == "completed"),
            key=lambda run: run.schedule_time,
        )
        found = []
        for run in done:
            result = run.result if isinstance(run.result, dict) else {}
            found.append((run.key, _instant(result.get("since")), _instant(result.get("until"))))
        return found

    @property
    def problems(self) -> list[str]:
        """Each way the chain of windows broke, in words."""
        found: list[str] = []
        for run in self.runs:
            if run.record.get("status") != "completed":
                where = f"{self.job} {run.schedule_time:%H:%M}Z"
                found.append(f"{where} ended {run.record.get('status', 'without a record')}")
        end = self.start
        windows = self.windows()
        by_run = {run.key: run for run in self.runs}
        for key, since, until in windows:
            where = f"{self.job} {by_run[key].schedule_time:%H:%M}Z"
            if since is None or until is None:
                found.append(f"{where} returned no window (since, until): {by_run[key].result!r}")
                continue
            if until != by_run[key].schedule_time:
                found.append(f"{where}'s window ends at {until:%H:%M:%S}Z, not at its schedule time")
            if since > end:
                found.append(f"{where}'s window starts at {since:%H:%M:%S}Z: a gap after {end:%H:%M:%S}Z")
            if since < end:
                found.append(f"{where}'s window starts at {since:%H:%M:%S}Z: it overlaps the one before")
            end = until
        chained = {(since, until) for _, since, until in windows if since is not None and until is not None}
        copied: dict[tuple[datetime, datetime], int] = {}
        for copy in self.copies:
            copied[(copy.since, copy.until)] = copied.get((copy.since, copy.until), 0) + 1
        for window, count in sorted(copied.items()):
            text = f"[{window[0]:%H:%M:%S}Z, {window[1]:%H:%M:%S}Z)"
            if window not in chained:
                found.append(f"the window {text} was copied, but no completed run's window is it")
            if count > 1:
                found.append(f"the window {text} was copied {count} times")
        for since, until in sorted(chained - set(copied)):
            found.append(f"the window [{since:%H:%M:%S}Z, {until:%H:%M:%S}Z) was never copied")
        if not self.lost or not self.killed:
            found.append(
                f"the faults hit {self.lost} answers and killed {self.killed} instances: the chain "
                "was not tested under a lost answer and a kill"
            )
        return found

    @property
    def ok(self) -> bool:
        return not self.problems

    def summary(self) -> str:
        """What happened, in a line."""
        windows = self.windows()
        end = windows[-1][2] if windows and windows[-1][2] else self.start
        return (
            f"{len(windows)} windows {self.start:%H:%M:%S}-{end:%H:%M:%S}Z, {len(self.copies)} copies; "
            f"{self.lost} answers lost, {self.killed} instances killed"
        )
