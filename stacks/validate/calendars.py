"""A scheduled job's calendar (`Job.active`, `Job.exclude`; docs/stacks/schedules.md, "Calendars"):
a window that has not ended and starts before it ends, excluded dates that are dates inside it, and
at least one tick of the schedule the calendar lets run. "Today" is the job's time zone's date by
runonce's clock, so a test sets it."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import date, datetime, time, timedelta
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from cronsim import CronSim, CronSimError

from runonce import _clock as clock
from runonce.contract import Excluded
from runonce.scheduler.exclusion import JobCalendar
from stacks.config.problem import Problem, ProblemAt
from stacks.config.team import Job

MAX_STEPS = 10_000
"""How many excluded days the tick search steps over before it gives up (and reports nothing)."""


def calendar(job: Job, problem: ProblemAt) -> Iterator[Problem]:
    """The job's window and excluded dates, then whether any tick is left to run."""
    active, exclude = job.active, job.exclude
    if active is None and exclude is None:
        return
    try:
        zone = ZoneInfo(job.time_zone)
    except (ZoneInfoNotFoundError, ValueError):
        return  # reported on time_zone (`schedules.schedule`): no date can be read without it
    now = clock.now()
    today = now.astimezone(zone).date()
    found = False
    if active is not None:
        for name in ("start", "end"):
            value = getattr(active, name)
            if value is not None and not _is_date(value):
                found = True
                yield problem(f"active.{name}", f"{value!r} is not a date", f"write {name}=date(YYYY, M, D)")
        if found:
            return
        if active.start is not None and active.end is not None and active.start > active.end:
            found = True
            yield problem(
                "active.start",
                f"{active.start} is after active.end ({active.end}): no date is active",
                "swap them, or correct one",
            )
        if active.end is not None and active.end < today:
            found = True
            yield problem(
                "active.end",
                f"{active.end} has passed (today is {today} in {job.time_zone}): every run would be excluded",
                "remove the job from the team file, or set a later active.end",
            )
    if exclude is not None:
        for index, day in enumerate(exclude.dates):
            field = f"exclude.dates[{index}]"
            if not _is_date(day):
                found = True
                yield problem(field, f"{day!r} is not a date", "write date(YYYY, M, D): whole days, no time")
            elif active is not None and (
                (active.start is not None and day < active.start)
                or (active.end is not None and day > active.end)
            ):
                found = True
                yield problem(
                    field,
                    f"{day} is outside active ({active.start or 'open'} to {active.end or 'open'}): "
                    "no run falls on it anyway",
                    "remove it, or widen active",
                )
    rules = job.calendar
    if found or rules is None:
        return
    if first_included_tick(job.schedule, rules, now) is None:
        yield problem(
            "exclude" if exclude is not None else "active",
            f"no run of {job.schedule!r} in {job.time_zone} from now ({today}) falls on a date "
            "the calendar lets run: every tick would be excluded",
            "widen active, remove excluded dates, or change the schedule",
        )


def first_included_tick(schedule: str, rules: JobCalendar, now: datetime) -> datetime | None:
    """The first tick of `schedule` after `now` (in the calendar's time zone) that the calendar
    does not exclude; None if there is none (or the schedule cannot be read: reported by
    `schedules.schedule`)."""
    zone = ZoneInfo(rules.time_zone)
    after = now.astimezone(zone)
    if rules.start is not None and after.date() < rules.start:
        after = datetime.combine(rules.start, time(), zone) - timedelta(seconds=1)
    for _ in range(MAX_STEPS):
        try:
            tick = next(iter(CronSim(schedule, after)), None)
        except (CronSimError, ValueError):
            return None
        if tick is None:
            return None
        why = rules.excluded_because(tick)
        if why is None:
            return tick
        if why is Excluded.AFTER_WINDOW:
            return None
        # Step over the rest of the excluded day: cronsim yields the ticks after `after`.
        next_day = tick.astimezone(zone).date() + timedelta(days=1)
        after = datetime.combine(next_day, time(), zone) - timedelta(seconds=1)
    return None


def _is_date(value: object) -> bool:
    # A datetime is a date too, but a calendar's dates are whole days in the job's time zone.
    return isinstance(value, date) and not isinstance(value, datetime)
