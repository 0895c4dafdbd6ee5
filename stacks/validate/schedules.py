"""A scheduled job's Scheduler settings: a unix-cron schedule that fires, a known time zone,
the attempt deadline and function timeout ranges, and Scheduler's retry_config ranges."""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from datetime import datetime
from functools import cache
from zoneinfo import ZoneInfo, available_timezones

from cronsim import CronSim, CronSimError

from runonce.contract import Overlap
from stacks.config.problem import Problem, ProblemAt
from stacks.config.team import Job, Retry
from stacks.validate.cron_check import schedule_issue
from stacks.validate.functions import function_settings

MIN_ATTEMPT_DEADLINE = 15
MAX_ATTEMPT_DEADLINE = 30 * 60
MAX_HTTP_TIMEOUT = 3600
MAX_RETRY_COUNT = 5
MAX_BACKOFF = 3600
MAX_DOUBLINGS = 16


def schedule(job: Job, problem: ProblemAt) -> Iterator[Problem]:
    """A unix-cron schedule Scheduler supports, that fires, in a known IANA time zone."""
    issue = schedule_issue(job.schedule)
    if issue:
        yield problem("schedule", issue.message, issue.fix)
    if job.time_zone not in _time_zones():
        yield problem(
            "time_zone",
            f"{job.time_zone!r} is not an IANA time zone",
            'use a name such as "Etc/UTC" or "Europe/Berlin"',
        )


@cache
def _time_zones() -> frozenset[str]:
    """Known IANA zone names (read once: listing them walks the tz database)."""
    return frozenset(available_timezones())


def attempt_deadline(job: Job, maximum: int, problem: ProblemAt) -> Iterator[Problem]:
    """Scheduler's attempt deadline range for the job's target: up to `maximum` seconds."""
    if not MIN_ATTEMPT_DEADLINE <= job.attempt_deadline_seconds <= maximum:
        target = "HTTP targets" if maximum == MAX_ATTEMPT_DEADLINE else "App Engine targets"
        yield problem(
            "attempt_deadline_seconds",
            f"{job.attempt_deadline_seconds} s is outside Scheduler's "
            f"{MIN_ATTEMPT_DEADLINE}-{maximum} s range for {target}",
            f"choose {MIN_ATTEMPT_DEADLINE}-{maximum}",
        )


def limits(job: Job, problem: ProblemAt) -> Iterator[Problem]:
    """Scheduler's attempt deadline range and the function's own limits."""
    yield from attempt_deadline(job, MAX_ATTEMPT_DEADLINE, problem)
    if not 1 <= job.timeout_seconds <= MAX_HTTP_TIMEOUT:
        yield problem(
            "timeout_seconds",
            f"{job.timeout_seconds} s is outside 1-{MAX_HTTP_TIMEOUT} s, the limit for HTTP functions",
            f"choose {max(MIN_ATTEMPT_DEADLINE, min(job.attempt_deadline_seconds, MAX_ATTEMPT_DEADLINE))}"
            f"-{MAX_HTTP_TIMEOUT} s (at least the attempt deadline; split longer work)",
        )
    yield from function_settings(job, problem)


def retry_ranges(retry: Retry, problem: ProblemAt) -> Iterator[Problem]:
    """Scheduler's retry_config ranges."""
    ranges = (
        ("retry.retry_count", retry.retry_count, MAX_RETRY_COUNT),
        ("retry.min_backoff_seconds", retry.min_backoff_seconds, MAX_BACKOFF),
        ("retry.max_backoff_seconds", retry.max_backoff_seconds, MAX_BACKOFF),
        ("retry.max_doublings", retry.max_doublings, MAX_DOUBLINGS),
    )
    for field, value, high in ranges:
        if not 0 <= value <= high:
            yield problem(field, f"{value} is outside Scheduler's range 0-{high}", f"choose 0-{high}")
    if retry.max_retry_duration_seconds < 0:
        yield problem(
            "retry.max_retry_duration_seconds",
            f"{retry.max_retry_duration_seconds} is negative",
            "use 0 (no limit) or a positive number of seconds",
        )
    if retry.min_backoff_seconds > retry.max_backoff_seconds:
        yield problem(
            "retry.min_backoff_seconds",
            f"{retry.min_backoff_seconds} s is above max_backoff_seconds ({retry.max_backoff_seconds} s)",
            "make min_backoff_seconds <= max_backoff_seconds",
        )


def shortest_gap_seconds(job: Job) -> int | None:
    """Shortest time between two runs over the next 100, in the job's zone; None if unreadable."""
    return _shortest_gap_seconds(job.schedule, job.time_zone)


@cache
def _shortest_gap_seconds(schedule: str, time_zone: str) -> int | None:
    """`shortest_gap_seconds` by schedule and zone, computed once a process: several checks ask
    it of each job, and the jobs of a team often share a schedule."""
    if schedule_issue(schedule) or time_zone not in _time_zones():
        return None
    try:
        runs = CronSim(schedule, datetime(2026, 1, 1, tzinfo=ZoneInfo(time_zone)))
        times = [next(runs) for _ in range(100)]
    except (CronSimError, StopIteration):
        return None
    return int(min((later - earlier).total_seconds() for earlier, later in itertools.pairwise(times)))


def overlap(job: Job, problem: ProblemAt) -> Iterator[Problem]:
    """An overlap policy the library knows (the stack sends it as the overlap header)."""
    if job.overlap not in tuple(Overlap):
        yield problem(
            "overlap",
            f"{job.overlap!r} is not an overlap policy",
            f"use one of {', '.join(f'Overlap.{policy.name}' for policy in Overlap)} (from stacks.team)",
        )
