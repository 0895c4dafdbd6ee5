"""The runs the local scheduler loses on purpose, so that the watchdog and `runonce runs` have
something to find: a run it never delivers, and a run whose claim stays stuck once Scheduler's
retries ran out.

A never-delivered run is planned like any other and then skipped at its time (the journal says
so, `NotDelivered`): its ledger has no record. A stuck claim is a run whose every attempt that
gets to start the job body dies holding the claim (the instance is killed right after the
runonce core logs the start, as in an out-of-memory crash); the retries in between are answered
409 until the lease expires, the next one takes the run over and dies too, and when Scheduler's
retries are used up the record stays `in_progress` with nobody left to finish it.

Both are expected misses, labelled with the `MissedRun` the watchdog reports for them; the
verdict checks that each one went exactly as planned (see `report.judge`). The choice is seeded,
and falls on scheduled runs of one job in the first half of the window, with no forced run
carrying their time: by the window's end the watchdog's grace (the retry window plus the
deployed lease) is long past, and one job's `runonce runs` shows both.
"""

from __future__ import annotations

import dataclasses
import random
from dataclasses import dataclass
from datetime import datetime

from localscheduler.scheduler.cloud_scheduler import Trigger
from runonce.contract import MissedRun


@dataclass(frozen=True)
class PlannedMisses:
    """How many runs to lose on purpose, and the seed that picks them."""

    never_delivered: int = 0
    stuck_claims: int = 0
    seed: int = 1

    def __post_init__(self) -> None:
        if self.never_delivered < 0 or self.stuck_claims < 0:
            raise ValueError(
                f"planned misses cannot be negative: never_delivered={self.never_delivered}, "
                f"stuck_claims={self.stuck_claims}"
            )

    @property
    def total(self) -> int:
        """How many runs are lost in all."""
        return self.never_delivered + self.stuck_claims

    def place(self, plan: list[Trigger], start: datetime, end: datetime) -> list[Trigger]:
        """`plan` with the misses set on runs of the first job (in plan order) that has enough
        scheduled runs in the first half of (start, end] whose time no forced run carries.

        Raises ValueError, naming the counts and the window, when no job has that many.
        """
        if not self.total:
            return plan
        middle = start + (end - start) / 2
        borrowed = {_identity(t) for t in plan if t.forced}
        eligible: dict[tuple[str, str], list[Trigger]] = {}
        for trigger in plan:
            early = trigger.run.schedule_time <= middle
            if early and not trigger.forced and _identity(trigger) not in borrowed:
                eligible.setdefault(_job(trigger), []).append(trigger)
        job = next((job for job, runs in eligible.items() if len(runs) >= self.total), None)
        if job is None:
            raise ValueError(
                f"cannot lose {self.never_delivered} never-delivered and {self.stuck_claims} stuck runs: "
                f"no job has {self.total} scheduled runs between {start:%Y-%m-%d %H:%M} and "
                f"{middle:%H:%M} UTC without a forced run at their time; lower the counts or play more hours"
            )
        picked = random.Random(f"{self.seed}/misses").sample(eligible[job], self.total)
        misses = {
            id(trigger): MissedRun.NEVER_DELIVERED if index < self.never_delivered else MissedRun.RETRIED_OUT
            for index, trigger in enumerate(picked)
        }
        return [
            dataclasses.replace(trigger, miss=misses[id(trigger)]) if id(trigger) in misses else trigger
            for trigger in plan
        ]


def _job(trigger: Trigger) -> tuple[str, str]:
    return (trigger.run.team.name, trigger.run.job.name)


def _identity(trigger: Trigger) -> tuple[str, str, datetime]:
    return (*_job(trigger), trigger.run.schedule_time)
