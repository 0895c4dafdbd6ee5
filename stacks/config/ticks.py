"""The ticks of a job's schedule that its calendar lets run, in order (docs/stacks/schedules.md,
"Calendars"): what synth counts to end a campaign's window after its Nth run (`Window.runs`) and
searches to refuse a calendar that would exclude every tick. The ticks are cronsim's, evaluated in
the calendar's time zone as Cloud Scheduler evaluates the job's cron (`runonce.scheduler.expected`).
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, time, timedelta
from functools import lru_cache
from zoneinfo import ZoneInfo

from cronsim import CronSim, CronSimError

from runonce.contract import Excluded
from runonce.scheduler.exclusion import JobCalendar

MAX_EXCLUDED_DAYS = 10_000
"""How many excluded days the search steps over before it gives up (and yields no more)."""


def included_ticks(schedule: str, rules: JobCalendar, after: datetime) -> Iterator[datetime]:
    """The ticks (UTC) of `schedule` after `after` and on or after the window's start that `rules`
    does not exclude, oldest first, until the window ends. Nothing for a schedule or time zone that
    cannot be read: those are reported on their own fields."""
    zone = ZoneInfo(rules.time_zone)
    after = after.astimezone(zone)
    if rules.start is not None and after.date() < rules.start:
        after = datetime.combine(rules.start, time(), zone) - timedelta(seconds=1)
    steps = 0
    while steps < MAX_EXCLUDED_DAYS:
        try:
            # cronsim yields the ticks strictly after `after`, in `after`'s zone.
            for tick in CronSim(schedule, after):
                why = rules.excluded_because(tick)
                if why is None:
                    yield tick.astimezone(UTC)
                elif why is Excluded.AFTER_WINDOW:
                    return
                else:  # an excluded date: step over the rest of its day at once
                    break
            else:
                return  # a schedule that never fires again (e.g. 30 February)
        except (CronSimError, ValueError):
            return
        steps += 1
        after = datetime.combine(tick.date() + timedelta(days=1), time(), zone) - timedelta(seconds=1)


@lru_cache(maxsize=256)  # a job's calendar is asked for by validation, each construct and the watchdog
def campaign_last_run(schedule: str, rules: JobCalendar, runs: int) -> datetime | None:
    """The `runs`th tick (UTC) from the window's start that `rules` lets run: excluded ticks do not
    count. None if the schedule has fewer such ticks (or cannot be read)."""
    start = datetime.combine(rules.start, time(), ZoneInfo(rules.time_zone)) if rules.start else None
    if start is None or runs < 1:
        return None
    for count, tick in enumerate(included_ticks(schedule, rules, start - timedelta(seconds=1)), start=1):
        if count == runs:
            return tick
    return None
