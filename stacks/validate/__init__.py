"""Synth-time checks of the team config: every problem is collected, then reported once.

Each problem names the team, the job and the field, says what is wrong and how to fix it. One
module per concern: `team` (the team's own fields), `names` (derived resource names across
teams), `schedules` (Scheduler's settings), `windows` (leases, retries and retention against the
timeout and the next run), `functions` (Cloud Run's limits, the handler and its requirements,
env and labels), `targets` (Google API targets), `events` (event jobs), `sharing` (jobs of one
function starting at once), `calendars` (a job's active window and excluded dates), `catch_up`
(the watchdog's catch-up window of a scheduled job), `pause` (the watchdog pausing a job that
keeps failing), `alerts` (whom the team's alerts reach, and when), `store` (a Valkey store's
region, sizes, network, and the parts of a team that cannot use it), `watchdog` (the names the
team's watchdog takes), `operators` (`Team.operators`) and `quotas`. Google's own limits are
pinned in `stacks.locations`, `function_limits` and `cron_check`. This module only runs them, in
the order their problems are reported. Files that do not load or hold values of the wrong type
are reported by `stacks.config.team_files` first.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence

from stacks.config.problem import InvalidConfig, Problem, ProblemAt
from stacks.config.team import AppEngineJob, EventJob, Job, Service, ServiceJob, Team
from stacks.validate import (
    alerts,
    calendars,
    catch_up,
    events,
    functions,
    names,
    pause,
    schedules,
    services,
    sharing,
    targets,
    windows,
)
from stacks.validate.operators import operators
from stacks.validate.quotas import quota_problems
from stacks.validate.store import store_problems
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
        for svc in team.services:
            problems.extend(_service(team, svc))
        for service_job in team.service_jobs:
            problems.extend(_service_job(team, service_job))
        for app_engine_job in team.app_engine_jobs:
            problems.extend(_app_engine_job(team, app_engine_job))
        problems.extend(sharing.crowded_functions(team))
        problems.extend(alerts.alert_settings(team))
        problems.extend(store_problems(team))
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
    yield from schedules.overlap(job, problem)
    yield from calendars.calendar(job, problem)
    ranges = [*schedules.limits(job, problem), *schedules.retry_ranges(job.retry, problem)]
    yield from ranges
    if not ranges:  # cross-layer rules only make sense (and give sane hints) on in-range values
        yield from windows.cross_layer(job, problem)
        yield from catch_up.catch_up(team, job, problem)
        yield from pause.pause(team, job, problem)
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


def _service_job(team: Team, job: ServiceJob) -> Iterator[Problem]:
    """One job on a Cloud Run service: its name, Scheduler's settings, the service it names, and
    the cross-layer rules against that service's request timeout."""

    def problem(field: str, message: str, fix: str) -> Problem:
        # The timeout is the service's: say where to change it.
        shown = f"services[{job.service}].timeout_seconds" if field == "timeout_seconds" else field
        return Problem(team.name, job.name, shown, message, fix)

    yield from names.job_name(team, job.name, problem)
    yield from services.service_job(team, job, problem)
    svc = team.service(job.service)
    if svc is not None:  # without it there is no timeout to check the windows against
        yield from _scheduled(
            team, job.scheduled(svc.timeout_seconds), schedules.MAX_ATTEMPT_DEADLINE, problem
        )


def _app_engine_job(team: Team, job: AppEngineJob) -> Iterator[Problem]:
    """One job on the team's App Engine application: its name, routing, request timeout and
    Scheduler's settings (an App Engine target's attempt deadline may reach 24 hours)."""

    def problem(field: str, message: str, fix: str) -> Problem:
        return Problem(team.name, job.name, field, message, fix)

    yield from names.job_name(team, job.name, problem)
    fields = list(services.app_engine_job(job, problem))
    yield from fields
    if not any(found.field == "timeout_seconds" for found in fields):
        yield from _scheduled(team, job.scheduled(), services.MAX_APP_ENGINE_ATTEMPT_DEADLINE, problem)


def _scheduled(team: Team, view: Job, max_deadline: int, problem: ProblemAt) -> Iterator[Problem]:
    """Scheduler's settings of a service or App Engine job, checked on its `scheduled` view."""
    yield from schedules.schedule(view, problem)
    yield from schedules.overlap(view, problem)
    yield from calendars.calendar(view, problem)
    ranges = [
        *schedules.attempt_deadline(view, max_deadline, problem),
        *schedules.retry_ranges(view.retry, problem),
    ]
    yield from ranges
    if not ranges:
        yield from windows.cross_layer(view, problem)
        yield from catch_up.catch_up(team, view, problem)
        yield from pause.pause(team, view, problem)


def _service(team: Team, svc: Service) -> Iterator[Problem]:
    """One of `Team.services`, its fields named `services[NAME].FIELD`."""

    def problem(field: str, message: str, fix: str) -> Problem:
        return Problem(team.name, None, f"services[{svc.name}].{field}", message, fix)

    yield from services.service(team, svc, problem)
