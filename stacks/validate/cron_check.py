"""Is a schedule one Cloud Scheduler accepts, and does it ever fire?

cronsim (the parser the local scheduler uses too) understands more than Scheduler does: `L`, `W`,
`#` and `?` are Quartz-style extensions that Scheduler's unix-cron format does not have ("Cron job
format and time zone", https://cloud.google.com/scheduler/docs/configuring/cron-job-schedules).
And a well-formed expression can name a day that no month in it has (`0 0 31 2 *`): Scheduler
would accept the job and never run it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime

from cronsim import CronSim, CronSimError

# Month and weekday names may contain the letters below (JUL, WED): strip them before looking.
_NAMES = re.compile(r"JAN|FEB|MAR|APR|MAY|JUN|JUL|AUG|SEP|OCT|NOV|DEC|SUN|MON|TUE|WED|THU|FRI|SAT", re.I)
UNSUPPORTED = {
    "L": "L (last day)",
    "W": "W (nearest weekday)",
    "#": "# (nth weekday of the month)",
    "?": "? (no specific value)",
}
"""Quartz-style cron characters Scheduler's unix-cron does not support, and what they mean."""


@dataclass(frozen=True)
class ScheduleIssue:
    """Why a schedule cannot be used, and how to fix it."""

    message: str
    """What is wrong, and why it matters."""
    fix: str
    """What to change."""


def schedule_issue(schedule: str) -> ScheduleIssue | None:
    """What is wrong with this schedule for Cloud Scheduler, or None if it is fine."""
    fields = schedule.split()
    if len(fields) != 5:
        return _not_unix_cron(schedule)
    extensions = [
        meaning for char, meaning in UNSUPPORTED.items() if char in _NAMES.sub("", schedule).upper()
    ]
    if extensions:
        return ScheduleIssue(
            f"{schedule!r} uses {', '.join(extensions)}, which Cloud Scheduler's unix-cron format "
            "does not support",
            "use only numbers, names, '*', ',', '-' and '/' (e.g. \"0 3 28-31 * *\" with a check in "
            'the job for "last day of the month")',
        )
    try:
        CronSim(schedule, datetime(2000, 1, 1))
    except CronSimError:
        if _never_fires(fields):
            return ScheduleIssue(
                f"{schedule!r} is valid cron but never fires: day-of-month {fields[2]!r} does not "
                f"occur in month {fields[3]!r}",
                "choose a day that exists in those months (February has at most 29 days; April, "
                "June, September and November 30)",
            )
        return _not_unix_cron(schedule)
    return None


def _never_fires(fields: list[str]) -> bool:
    """The expression is only rejected for its day/month combination: each field alone parses."""
    with_any_month = " ".join([*fields[:3], "*", fields[4]])
    try:
        CronSim(with_any_month, datetime(2000, 1, 1))
    except CronSimError:
        return False
    return True


def _not_unix_cron(schedule: str) -> ScheduleIssue:
    return ScheduleIssue(
        f"{schedule!r} is not a unix-cron expression; Scheduler sends no "
        "X-CloudScheduler-ScheduleTime for other formats, so runs cannot be told apart",
        'write five cron fields, e.g. "*/5 * * * *" for every 5 minutes',
    )
