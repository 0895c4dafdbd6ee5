"""Which runs a scheduled job should have had, and their run keys: from its cron and time zone alone.

Cloud Scheduler evaluates a unix-cron schedule in the job's time zone; across daylight saving
time the expected runs are cronsim's: a daily "30 2 * * *" in Europe/Berlin runs once at 03:00
local on the spring-forward day (02:30 does not exist) and once, at the first 02:30, on the
fall-back day. The run key of an expected run is the key the handler
computes for its scheduled (not forced) delivery, so a ledger can be checked for every expected
run by reading one record each, with no index. The operators' `runonce runs` and the watchdog
use it; the decorators never import it (cronsim is not a dependency of a scheduled function).
"""

from __future__ import annotations

from datetime import UTC, datetime
from zoneinfo import ZoneInfo

from cronsim import CronSim

from .._instant import Instant
from .delivery import Delivery
from .keys import run_key


def expected_times(schedule: str, time_zone: str, start: datetime, end: datetime) -> list[datetime]:
    """The instants (UTC) in (start, end] at which `schedule` fires in `time_zone`.

    `start` and `end` must be aware datetimes; cronsim's ValueError (a bad expression) and
    ZoneInfoNotFoundError (an unknown zone) reach the caller unchanged.
    """
    if start.tzinfo is None or end.tzinfo is None:
        raise ValueError("start and end must be timezone-aware datetimes")
    times: list[datetime] = []
    for moment in CronSim(schedule, start.astimezone(ZoneInfo(time_zone))):
        instant = moment.astimezone(UTC)
        if instant > end:
            return times
        times.append(instant)
    return times  # cronsim ends only for a schedule that never fires again (e.g. 30 February)


def scheduled_key(job: str, schedule_time: datetime, project: str, location: str) -> str:
    """The run key of the scheduled delivery of `job` (its Scheduler job id) at `schedule_time`.

    `project` and `location` are what the stack puts in X-Runonce-Project and X-Runonce-Location.
    Cron instants are whole minutes, so the instant carries no fraction.
    """
    return run_key(Delivery(job, cron_instant(schedule_time), project, location, forced=False))


def cron_instant(moment: datetime) -> Instant:
    """A cron time as the ScheduleTime header carries it: UTC, whole seconds (`.rfc3339()` is the
    form every record and key of it uses)."""
    return Instant(moment.astimezone(UTC).replace(microsecond=0), 0)


def next_time(schedule: str, time_zone: str, after: datetime) -> datetime:
    """The first instant (UTC) after `after` at which `schedule` fires in `time_zone`: the
    ScheduleTime a forced run dispatched at `after` carries. ValueError if it never fires again."""
    for moment in CronSim(schedule, after.astimezone(ZoneInfo(time_zone))):
        return moment.astimezone(UTC)
    raise ValueError(f"the schedule {schedule!r} never fires after {after.isoformat()}")


def forced_key(job: str, next_scheduled: datetime, project: str, location: str) -> str:
    """The run key of a forced run of `job` dispatched before its scheduled time `next_scheduled`."""
    return run_key(Delivery(job, cron_instant(next_scheduled), project, location, forced=True))
