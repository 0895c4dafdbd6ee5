"""When each job runs: its unix-cron schedule evaluated in its own time zone.

Cloud Scheduler evaluates a schedule in the job's time zone, so "0 3 * * *" in Europe/Berlin
skips or repeats with daylight saving time exactly as cronsim does; the result is UTC.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from zoneinfo import ZoneInfo

from cronsim import CronSim

from stacks.team import Job, Team


@dataclass(frozen=True)
class PlannedRun:
    """One scheduled execution of a job: what Scheduler delivers at `schedule_time`."""

    team: Team
    job: Job
    schedule_time: datetime
    """The scheduled instant (UTC); also the ScheduleTime header of every delivery of the run."""
    next_time: datetime
    """The job's following scheduled instant (UTC): retries of this run stop there."""


def fire_times(job: Job, after: datetime) -> Iterator[datetime]:
    """The job's scheduled instants strictly after `after`, in UTC, forever."""
    local = after.astimezone(ZoneInfo(job.time_zone))
    for moment in CronSim(job.schedule, local):
        yield moment.astimezone(UTC)


def planned_runs(team: Team, job: Job, start: datetime, end: datetime) -> list[PlannedRun]:
    """Every run of `job` scheduled in (start, end], each with the time of the run after it."""
    times = fire_times(job, start)
    runs: list[PlannedRun] = []
    moment = next(times)
    while moment <= end:
        following = next(times)
        runs.append(PlannedRun(team, job, moment, following))
        moment = following
    return runs
