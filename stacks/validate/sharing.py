"""Jobs that share a function must not start more requests at once than it has instances: an
instance serves one request at a time, and a delivery that waits more than 10 s for one is
refused (429), spending the retries a crashed run needs (`stacks.config.sharing` says why)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from functools import cache
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from cronsim import CronSim, CronSimError

from stacks import naming
from stacks.config import sharing
from stacks.config.problem import Problem
from stacks.config.sharing import SharedFunction, shared_functions
from stacks.config.team import Job, Team
from stacks.validate.cron_check import schedule_issue


def crowded_functions(team: Team) -> Iterator[Problem]:
    """Jobs sharing a function must not start more requests at once than it has instances."""
    for function in shared_functions(team):
        crowded = crowded_start(function)
        if crowded is None:
            continue
        limit = function.settings.max_instances
        starting = [job.name for job in crowded.jobs]
        yield Problem(
            team.name,
            starting[-1],
            "max_instances",
            f"jobs {sharing.names(function.job_names)} share the function "
            f"{naming.function_name(team.name, function.name)} (same {function.settings.code} and "
            f"settings), and {len(starting)} of them ({sharing.names(starting)}) start at "
            f"{crowded.at:%a %H:%M} UTC: an instance serves one request at a time and the "
            f"function has max_instances={limit}, so the deliveries beyond the first {limit} wait "
            "at most 10 s for an instance and are then refused (429), spending the retries a "
            "crashed run needs",
            f"set max_instances={crowded.peak} on all {len(function.jobs)} of them (they keep "
            "sharing one function), start some of them in another minute, or give one a "
            "different setting so that it gets a function of its own",
        )


# Where the starts of the jobs of one function are compared: one week from a Monday, in UTC,
# at most this many starts per job (a job starting every minute is compared over its first
# 35 hours, where it already meets every other job of the function that starts at all).
WEEK_FROM = datetime(2026, 1, 5, tzinfo=UTC)
WEEK = timedelta(days=7)
MAX_STARTS = 2100


@cache
def _starts(schedule: str, time_zone: str) -> frozenset[int]:
    """The minutes (since the epoch, UTC) at which a schedule starts during the compared week;
    empty when the schedule or time zone is invalid (reported by their own checks)."""
    if schedule_issue(schedule):
        return frozenset()
    try:
        zone = ZoneInfo(time_zone)
        runs = CronSim(schedule, (WEEK_FROM - timedelta(seconds=1)).astimezone(zone))  # from WEEK_FROM on
        end = WEEK_FROM + WEEK
        starts: set[int] = set()
        for at in runs:
            if at >= end or len(starts) >= MAX_STARTS:
                break
            starts.add(int(at.timestamp()) // 60)
    except (CronSimError, ZoneInfoNotFoundError, ValueError, StopIteration):
        return frozenset()
    return frozenset(starts)


@dataclass(frozen=True)
class CrowdedStart:
    """A minute at which more jobs of one function start than it has instances."""

    function: SharedFunction
    at: datetime
    """The first such minute of the compared week, UTC."""
    jobs: list[Job]
    """The jobs starting then."""
    peak: int
    """The most of its jobs that start in any one minute of the week."""


def crowded_start(function: SharedFunction) -> CrowdedStart | None:
    """The first minute at which more of the function's jobs start than `max_instances`, if any."""
    limit = function.settings.max_instances
    if len(function.jobs) <= limit or limit < 1:
        return None
    counts: Counter[int] = Counter()
    for job in function.jobs:
        counts.update(_starts(job.schedule, job.time_zone))
    crowded = sorted(minute for minute, count in counts.items() if count > limit)
    if not crowded:
        return None
    minute = crowded[0]
    jobs = [job for job in function.jobs if minute in _starts(job.schedule, job.time_zone)]
    return CrowdedStart(function, datetime.fromtimestamp(minute * 60, UTC), jobs, max(counts.values()))
