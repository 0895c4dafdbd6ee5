"""Synth-time checks of the team config: every problem is collected, then reported once.

Each problem names the team, the job and the field, says what is wrong and how to fix it. One
module per concern: `team` (the team's own fields), `names` (derived resource names across
teams), `schedules` (Scheduler's settings), `windows` (leases, retries and retention against the
timeout and the next run), `functions` (Cloud Run's limits, the handler and its requirements,
env and labels), `targets` (Google API targets), `events` (event jobs), `sharing` (jobs of one
function starting at once), `alerts` (whom the team's alerts reach, and when), `watchdog` (the
names the team's watchdog takes), `operators` (`Team.operators`) and `quotas`. Google's own
limits are pinned in `stacks.locations`, `function_limits` and `cron_check`. This module only
runs them, in the order their problems are reported. Files that do not load or hold values of
the wrong type are reported by `stacks.config.team_files` first.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence

from stacks.config.problem import InvalidConfig, Problem
from stacks.config.team import EventJob, Job, Team
from stacks.validate import alerts, events, functions, names, schedules, sharing, targets, windows
from stacks.validate.operators import operators
from stacks.validate.quotas import quota_problems
from stacks.validate.team import team_fields
from stacks.validate.watchdog import watchdog
from stacks.validate.windows import retry_window_seconds

__all__ = ["InvalidConfig", "Problem", "find_problems", "retry_window_seconds", "validate"]


def validate(teams: Iterable[Team], files: Sequence[str] | None = None) -> None:
    """Raise InvalidConfig listing every problem in these teams; return if there is none."""
    found = find_problems(list(teams), files)
    if found:
        raise InvalidConfig(found)


def find_problems(teams: Sequence[Team], files: Sequence[str] | None = None) -> list[Problem]:
    """Every problem in these teams, each team's and job's in config order. `files` (parallel to
    `teams`) names each team's file in its problems and in the cross-team ones."""
    shown = list(files) if files is not None else [""] * len(teams)
    found = list(names.across_teams(teams, shown))
    for team, file in zip(teams, shown, strict=True):
        problems = [*team_fields(team), *watchdog(team), *operators(team)]
        for job in team.jobs:
            problems.extend(_job(team, job))
        for event_job in team.event_jobs:
            problems.extend(_event_job(team, event_job))
        problems.extend(sharing.crowded_functions(team))
        problems.extend(alerts.alert_settings(team))
        found.extend(_in_file(problem, file) for problem in problems)
    found.extend(quota_problems(teams, shown))
    return found


def _in_file(problem: Problem, file: str) -> Problem:
    if problem.file or not file:
        return problem
    return Problem(problem.team, problem.job, problem.field, problem.message, problem.fix, file)


def _job(team: Team, job: Job) -> Iterator[Problem]:
    """One job's fields, Scheduler's and Cloud Run's limits and the cross-layer rules."""

    def problem(field: str, message: str, fix: str) -> Problem:
        return Problem(team.name, job.name, field, message, fix)

    yield from names.job_name(team, job.name, problem)
    yield from schedules.schedule(job, problem)
    ranges = [*schedules.limits(job, problem), *schedules.retry_ranges(job.retry, problem)]
    yield from ranges
    if not ranges:  # cross-layer rules only make sense (and give sane hints) on in-range values
        yield from windows.cross_layer(job, problem)
    if (yield from targets.code(job, problem)):
        yield from functions.source(job, problem)
    yield from functions.environment(job, problem)
    yield from functions.job_labels(team.name, job.name, job.labels, set(team.labels))


def _event_job(team: Team, job: EventJob) -> Iterator[Problem]:
    """One event job: its names, Pub/Sub's ranges, the cross-layer rules and its handler."""

    def problem(field: str, message: str, fix: str) -> Problem:
        return Problem(team.name, job.name, field, message, fix)

    yield from names.job_name(team, job.name, problem)
    yield from events.topic(job, problem)
    yield from events.trigger(job, problem)
    ranges = [*events.push_ranges(job, problem), *functions.function_settings(job, problem)]
    yield from ranges
    if not ranges:
        yield from events.event_cross_layer(job, problem)
    yield from functions.event_source(job, problem)
    yield from functions.environment(job.function_job({}), problem)
    yield from functions.job_labels(team.name, job.name, job.labels, set(team.labels))
