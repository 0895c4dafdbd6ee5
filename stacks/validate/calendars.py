"""A scheduled job's calendar (`Job.active`, `Job.exclude`; docs/schedules/calendars.md):
a window that has not ended and starts before it ends, a campaign's run count (`Window.runs`) with
a start, without an end, whose last run is still to come, excluded dates that are dates inside the
window, and at least one tick of the schedule the calendar lets run. "Today" is the job's time
zone's date by runonce's clock, so a test sets it."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import date, datetime
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from runonce import _clock as clock
from runonce.scheduler.exclusion import JobCalendar
from stacks.config.problem import Problem, ProblemAt
from stacks.config.team import MAX_RUNS, Job, Window
from stacks.config.ticks import included_ticks
from stacks.validate.cron_check import schedule_issue


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
        if active.runs is not None:
            campaign = list(_campaign(job, active, now, zone, problem))
            found = found or bool(campaign)
            yield from campaign
    last_day = _last_day(job, zone)
    if exclude is not None:
        for index, day in enumerate(exclude.dates):
            field = f"exclude.dates[{index}]"
            if not _is_date(day):
                found = True
                yield problem(field, f"{day!r} is not a date", "write date(YYYY, M, D): whole days, no time")
            elif active is not None and (
                (active.start is not None and day < active.start) or (last_day is not None and day > last_day)
            ):
                found = True
                yield problem(
                    field,
                    f"{day} is outside active ({active.start or 'open'} to {last_day or 'open'}): "
                    "no run falls on it anyway",
                    "remove it, or widen active",
                )
    rules = job.calendar
    if found or rules is None or schedule_issue(job.schedule):
        return
    if first_included_tick(job.schedule, rules, now) is None:
        yield problem(
            "exclude" if exclude is not None else "active",
            f"no run of {job.schedule!r} in {job.time_zone} from now ({today}) falls on a date "
            "the calendar lets run: every tick would be excluded",
            "widen active, remove excluded dates, or change the schedule",
        )


def first_included_tick(schedule: str, rules: JobCalendar, now: datetime) -> datetime | None:
    """The first tick (UTC) of `schedule` after `now` that the calendar does not exclude; None if
    there is none (or the schedule cannot be read: reported by `schedules.schedule`)."""
    return next(included_ticks(schedule, rules, now), None)


def _campaign(
    job: Job, active: Window, now: datetime, zone: ZoneInfo, problem: ProblemAt
) -> Iterator[Problem]:
    """A campaign's `runs`: a whole number from 1 to MAX_RUNS, counted from `start`, with no `end`,
    whose last run the schedule reaches and has not passed."""
    runs = active.runs
    if not isinstance(runs, int) or isinstance(runs, bool) or not 1 <= runs <= MAX_RUNS:
        yield problem(
            "active.runs",
            f"{runs!r} is not a number of runs from 1 to {MAX_RUNS:,}",
            "write runs=N with N the campaign's number of scheduled runs, or leave it out",
        )
        return
    if active.end is not None:
        yield problem(
            "active.runs",
            f"is given with active.end ({active.end}): the window would end twice",
            "keep runs (the window ends after the Nth run) or end (after that date), not both",
        )
        return
    if active.start is None:
        yield problem(
            "active.runs",
            "counts runs from active.start, which is not set",
            "set active.start to the campaign's first date",
        )
        return
    if schedule_issue(job.schedule):
        return  # reported on schedule: no run can be counted without it
    rules = job.calendar
    last = rules.last_run if rules is not None else None
    if last is None:
        yield problem(
            "active.runs",
            f"{job.schedule!r} in {job.time_zone} has fewer than {runs} runs from {active.start} "
            "that the calendar lets run",
            "lower runs, remove excluded dates, or change the schedule",
        )
    elif last <= now:
        yield problem(
            "active.runs",
            f"run {runs} from {active.start} was at {last.astimezone(zone):%Y-%m-%d %H:%M} "
            f"{job.time_zone}, already past: every run would be excluded",
            "remove the job from the team file, or set a later active.start",
        )


def _last_day(job: Job, zone: ZoneInfo) -> date | None:
    """The window's last date: `end`, or the date of a campaign's last run in the job's zone."""
    rules = job.calendar
    if rules is None:
        return None
    if rules.last_run is not None:
        return rules.last_run.astimezone(zone).date()
    return rules.end


def _is_date(value: object) -> bool:
    # A datetime is a date too, but a calendar's dates are whole days in the job's time zone.
    return isinstance(value, date) and not isinstance(value, datetime)
