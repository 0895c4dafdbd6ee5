"""Names: a job name fits the names derived from it, and no two teams (or jobs) of the team
files derive the same resource name, which would make one deployment take over the other's."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterator, Sequence

from stacks import naming
from stacks.config.problem import Problem, ProblemAt
from stacks.config.sharing import shared_functions
from stacks.config.team import EVENTARC, Team


def across_teams(teams: Sequence[Team], files: list[str]) -> Iterator[Problem]:
    """Team names, and every derived resource name, must be unique across the team files."""
    by_name: dict[str, list[str]] = defaultdict(list)
    for team, file in zip(teams, files, strict=True):
        by_name[team.name].append(file)
    for name, used_by in by_name.items():
        for file in used_by[1:]:
            shown = ", ".join(f or "?" for f in used_by)
            yield Problem(
                name,
                None,
                "name",
                f"{len(used_by)} team files use this name ({shown}); it names the stack, its state "
                "file and its resources",
                "give every team file its own name",
                file,
            )
    yield from _name_collisions(teams, files)


def _derived_names(team: Team) -> Iterator[tuple[str | None, str, str, str]]:
    """(job, kind, scope, name) of every name the team's stack derives. The scope is where the
    name must be unique: the project (and region), or everywhere for bucket names."""
    project, region = team.project, f"{team.project}/{team.region}"
    yield None, "source bucket", "global", naming.bucket_name(team.project, team.name)
    yield None, "Artifact Registry repository", region, naming.repository_id(team.name)
    yield None, "Firestore database", project, team.database
    if team.watched:  # the watchdog's own (stacks/constructs/watchdog.py)
        yield None, "Firestore database", project, naming.watchdog_database(team.database)
        yield None, "function", region, naming.function_name(team.name, naming.WATCHDOG)
        yield None, "Scheduler job", region, naming.scheduler_job_name(team.name, naming.WATCHDOG)
        watchdog = naming.account_id(team.name, naming.WATCHDOG, naming.RUNTIME_ROLE)
        yield None, "service account", project, watchdog
    for role in naming.TEAM_ROLES:
        if role != "call" or team.needs_invoker:
            yield None, "service account", project, naming.team_account_id(team.name, role)
    for function in shared_functions(team):
        yield function.name, "function", region, naming.function_name(team.name, function.name)
        runtime = naming.account_id(team.name, function.name, naming.RUNTIME_ROLE)
        yield function.name, "service account", project, runtime
    for event in team.event_jobs:
        yield event.name, "function", region, naming.function_name(team.name, event.name)
        yield (
            event.name,
            "service account",
            project,
            naming.account_id(team.name, event.name, naming.RUNTIME_ROLE),
        )
        if not event.topic and not event.bucket:
            yield event.name, "topic", project, naming.topic_name(team.name, event.name)
        yield event.name, "topic", project, naming.dead_letter_topic_name(team.name, event.name)
        if event.trigger == EVENTARC:
            trigger = naming.account_id(team.name, event.name, naming.TRIGGER_ROLE)
            yield event.name, "service account", project, trigger
        else:
            yield event.name, "subscription", project, naming.push_subscription_name(team.name, event.name)
        yield event.name, "subscription", project, naming.dead_letter_subscription_name(team.name, event.name)
    for service in team.services:
        if service.deployed:  # an existing service's name is the team's to keep unique already
            yield None, "Cloud Run service", region, service.name
            runtime = naming.account_id(team.name, service.name, naming.RUNTIME_ROLE)
            yield None, "service account", project, runtime
    for name in [*(job.name for job in team.service_jobs), *(job.name for job in team.app_engine_jobs)]:
        where = f"{team.project}/{team.scheduler_region(name)}"
        yield name, "Scheduler job", where, naming.scheduler_job_name(team.name, name)
    for job in team.jobs:
        yield job.name, "Scheduler job", region, naming.scheduler_job_name(team.name, job.name)
        if team.keep_per_job_accounts:  # the old accounts, kept for one apply
            for role in naming.TEAM_ROLES:
                yield job.name, "service account", project, naming.account_id(team.name, job.name, role)


def _name_collisions(teams: Sequence[Team], files: list[str]) -> Iterator[Problem]:
    """Two teams (or two jobs) deriving the same resource name: one would overwrite the other's."""
    owners: dict[tuple[str, str, str], tuple[int, str | None]] = {}
    clashes: dict[tuple[int, str | None, int, str | None], list[str]] = defaultdict(list)
    for index, team in enumerate(teams):
        for job, kind, scope, name in _derived_names(team):
            first, first_job = owners.setdefault((kind, scope, name), (index, job))
            if teams[first].name == team.name:
                continue  # the same team twice or the same job twice: reported by name already
            clashes[(first, first_job, index, job)].append(f"{kind} {name!r}")
    for (first, first_job, second, job), names in clashes.items():
        other, team = teams[first], teams[second]
        whose = f"team {other.name!r}" + (f" job {first_job!r}" if first_job else "")
        in_file = f" ({files[first]})" if files[first] else ""
        database = all(name.startswith("Firestore database ") for name in names)
        yield Problem(
            team.name,
            job,
            "database" if database else "name",
            f"derives the same {', '.join(names)} as {whose}{in_file} in project {team.project!r}: "
            "one deployment would take over the other's resources",
            f'set database="{team.name}-runonce" (any unused id)'
            if database
            else "rename this job or team so that '<team>-<job>' differs from the other's",
            files[second],
        )


def job_name(team: Team, name: str, problem: ProblemAt) -> Iterator[Problem]:
    """A job name (scheduled or event) is a DNS label that keeps its function's name in limits."""
    if not naming.DNS_LABEL.match(name) or len(name) > naming.MAX_JOB_NAME:
        yield problem(
            "name",
            f"{name!r} is not a valid job name",
            f"use lowercase letters, digits and hyphens, start with a letter, "
            f"at most {naming.MAX_JOB_NAME} characters",
        )
    function = naming.function_name(team.name, name)
    if len(function) > naming.MAX_FUNCTION_NAME:
        yield problem(
            "name",
            f"the function name {function!r} has {len(function)} characters; Cloud Run "
            f"allows {naming.MAX_FUNCTION_NAME}",
            "shorten the job name (or the team name)",
        )
