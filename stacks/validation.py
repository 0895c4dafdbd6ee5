"""Synth-time checks of the team config: every problem is collected, then reported once.

Each problem names the team, the job and the field, says what is wrong and how to fix it. The
checks cover Scheduler's and Cloud Run's own limits, the cross-layer rules runonce depends on
(lease, attempt deadline, retention against the function timeout and the retry window) and the
resource names the stacks derive from team and job names.
"""

from __future__ import annotations

import itertools
import re
from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from datetime import datetime
from functools import cache
from zoneinfo import ZoneInfo, available_timezones

from cronsim import CronSim, CronSimError

from stacks import naming
from stacks.team import LEASE_MARGIN_SECONDS, Job, Retry, Team

MIN_ATTEMPT_DEADLINE = 15
MAX_ATTEMPT_DEADLINE = 30 * 60
MAX_HTTP_TIMEOUT = 3600
MAX_RETRY_COUNT = 5
MAX_BACKOFF = 3600
MAX_DOUBLINGS = 16
PROJECT_ID = re.compile(r"^[a-z][a-z0-9-]{4,28}[a-z0-9]$")
REGION = re.compile(r"^[a-z]+-[a-z]+[0-9]+$")
DATABASE_ID = re.compile(r"^[a-z][a-z0-9-]{2,61}[a-z0-9]$")
COLLECTION_ID = re.compile(r"^[A-Za-z0-9_-]{1,100}$")
MEMORY = re.compile(r"^[1-9][0-9]*(Mi|Gi)$")
ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
LABEL_KEY = re.compile(r"^[a-z][a-z0-9_-]{0,62}$")
LABEL_VALUE = re.compile(r"^[a-z0-9_-]{0,63}$")
# Set by the stack from the team and job config; a job may not override them. A job may only
# lengthen its lease with RUNONCE_LEASE_SECONDS (checked against the timeout below).
RESERVED_ENV = ("RUNONCE_DATABASE", "RUNONCE_COLLECTION", "RUNONCE_RETENTION_SECONDS", "GOOGLE_CLOUD_PROJECT")
LEASE_ENV = "RUNONCE_LEASE_SECONDS"


@dataclass(frozen=True)
class Problem:
    """One invalid setting: where it is, what is wrong, how to fix it."""

    team: str
    job: str | None
    field: str
    message: str
    fix: str

    def __str__(self) -> str:
        where = f"team {self.team!r}" + (f", job {self.job!r}" if self.job else "")
        return f"{where}, field {self.field}: {self.message}. Fix: {self.fix}."


class InvalidConfig(Exception):
    """Raised once with every problem found in the team files."""

    def __init__(self, problems: list[Problem]) -> None:
        self.problems = problems
        """All problems, in team and job order."""
        lines = "\n".join(f"  - {problem}" for problem in problems)
        super().__init__(f"{len(problems)} problem(s) in the team config:\n{lines}")


def validate(teams: Iterable[Team]) -> None:
    """Raise InvalidConfig listing every problem in these teams; return if there is none."""
    found = find_problems(list(teams))
    if found:
        raise InvalidConfig(found)


def find_problems(teams: list[Team]) -> list[Problem]:
    """Every problem in these teams, each team's and job's in config order."""
    found = list(_across_teams(teams))
    for team in teams:
        found.extend(_team(team))
        for job in team.jobs:
            found.extend(_job(team, job))
    return found


def retry_window_seconds(job: Job) -> int:
    """Longest time from a run's first attempt to the end of its last retry.

    Scheduler waits min_backoff, doubles it max_doublings times, then grows it linearly, never
    beyond max_backoff; every attempt may take the whole attempt deadline.
    """
    retry, attempt = job.retry, job.attempt_deadline_seconds
    backoffs = [retry.backoff_seconds(n) for n in range(1, retry.retry_count + 1)]
    window = sum(backoffs) + (retry.retry_count + 1) * attempt
    if retry.max_retry_duration_seconds:
        window = min(window, retry.max_retry_duration_seconds + attempt)
    return window


def _across_teams(teams: list[Team]) -> Iterator[Problem]:
    """Names that must be unique across team files: stacks and ledger databases."""
    for name, count in Counter(team.name for team in teams).items():
        if count > 1:
            yield Problem(
                name,
                None,
                "name",
                f"{count} team files use this name (it names the stack)",
                "give every team file its own name",
            )
    owners: dict[tuple[str, str], str] = {}
    for team in teams:
        key = (team.project, team.database)
        if key in owners and owners[key] != team.name:
            yield Problem(
                team.name,
                None,
                "database",
                f"database {team.database!r} in project {team.project!r} already belongs to "
                f"team {owners[key]!r}",
                f'set database="{team.name}-runonce" (any unused id)',
            )
        owners.setdefault(key, team.name)


def _team(team: Team) -> Iterator[Problem]:
    """The team's own fields and the names derived from them."""

    def problem(field: str, message: str, fix: str) -> Problem:
        return Problem(team.name, None, field, message, fix)

    if not naming.DNS_LABEL.match(team.name) or len(team.name) > naming.MAX_TEAM_NAME:
        yield problem(
            "name",
            f"{team.name!r} is not a valid team name (it prefixes every resource)",
            f"use lowercase letters, digits and hyphens, start with a letter, "
            f"at most {naming.MAX_TEAM_NAME} characters",
        )
    if not PROJECT_ID.match(team.project):
        yield problem(
            "project",
            f"{team.project!r} is not a GCP project id",
            "use the project id (6-30 lowercase letters, digits, hyphens), not its name or number",
        )
    if not REGION.match(team.region):
        yield problem("region", f"{team.region!r} is not a region", 'use a region such as "europe-west1"')
    if not DATABASE_ID.match(team.database):
        yield problem(
            "database",
            f"{team.database!r} is not a Firestore database id",
            "use 4-63 lowercase letters, digits and hyphens, starting with a letter "
            '(a dedicated database, not "(default)", keeps IAM scoped to the ledger)',
        )
    if not COLLECTION_ID.match(team.collection):
        yield problem(
            "collection",
            f"{team.collection!r} is not a top-level collection id",
            "use letters, digits, underscores and hyphens, no slashes",
        )
    if not team.jobs:
        yield problem("jobs", "the team has no jobs", "add at least one Job(...) or delete the team file")
    for name, count in Counter(job.name for job in team.jobs).items():
        if count > 1:
            yield Problem(
                team.name,
                name,
                "name",
                f"{count} jobs share this name",
                "give every job of a team its own name",
            )
    yield from _labels(team.name, None, team.labels)


def _job(team: Team, job: Job) -> Iterator[Problem]:
    """One job's fields, Scheduler's and Cloud Run's limits and the cross-layer rules."""

    def problem(field: str, message: str, fix: str) -> Problem:
        return Problem(team.name, job.name, field, message, fix)

    if not naming.DNS_LABEL.match(job.name) or len(job.name) > naming.MAX_JOB_NAME:
        yield problem(
            "name",
            f"{job.name!r} is not a valid job name",
            f"use lowercase letters, digits and hyphens, start with a letter, "
            f"at most {naming.MAX_JOB_NAME} characters",
        )
    function = naming.function_name(team.name, job.name)
    if len(function) > naming.MAX_FUNCTION_NAME:
        yield problem(
            "name",
            f"the function name {function!r} has {len(function)} characters; Cloud Run "
            f"allows {naming.MAX_FUNCTION_NAME}",
            "shorten the job name (or the team name)",
        )
    yield from _schedule(job, problem)
    yield from _limits(job, problem)
    yield from _retry(job.retry, problem)
    yield from _cross_layer(job, problem)
    yield from _source(job, problem)
    yield from _env(job, problem)
    yield from _labels(team.name, job.name, job.labels)


def _schedule(job: Job, problem) -> Iterator[Problem]:
    """unix-cron schedule and a known IANA time zone."""
    fields = job.schedule.split()
    try:
        if len(fields) != 5:
            raise CronSimError("not five fields")
        CronSim(job.schedule, datetime(2000, 1, 1))
    except CronSimError:
        yield problem(
            "schedule",
            f"{job.schedule!r} is not a unix-cron expression; Scheduler sends no "
            "X-CloudScheduler-ScheduleTime for other formats, so runs cannot be told apart",
            'write five cron fields, e.g. "*/5 * * * *" for every 5 minutes',
        )
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


def _limits(job: Job, problem) -> Iterator[Problem]:
    """Scheduler's attempt deadline range and the function's own limits."""
    if not MIN_ATTEMPT_DEADLINE <= job.attempt_deadline_seconds <= MAX_ATTEMPT_DEADLINE:
        yield problem(
            "attempt_deadline_seconds",
            f"{job.attempt_deadline_seconds} s is outside Scheduler's "
            f"{MIN_ATTEMPT_DEADLINE}-{MAX_ATTEMPT_DEADLINE} s range for HTTP targets",
            f"choose {MIN_ATTEMPT_DEADLINE}-{MAX_ATTEMPT_DEADLINE}",
        )
    if not 1 <= job.timeout_seconds <= MAX_HTTP_TIMEOUT:
        yield problem(
            "timeout_seconds",
            f"{job.timeout_seconds} s is outside 1-{MAX_HTTP_TIMEOUT} s, the limit for HTTP functions",
            f"choose at most {MAX_HTTP_TIMEOUT} s (split longer work)",
        )
    if not MEMORY.match(job.memory):
        yield problem(
            "memory", f"{job.memory!r} is not Cloud Run memory notation", 'use e.g. "256Mi" or "1Gi"'
        )
    if job.min_instances < 0 or job.max_instances < 1 or job.min_instances > job.max_instances:
        yield problem(
            "min_instances",
            f"min_instances={job.min_instances}, max_instances={job.max_instances} is not a valid range",
            "use 0 <= min_instances <= max_instances and max_instances >= 1",
        )


def _retry(retry: Retry, problem) -> Iterator[Problem]:
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


def _cross_layer(job: Job, problem) -> Iterator[Problem]:
    """Scheduler, function and ledger settings that must agree for exactly-once to hold."""
    if job.attempt_deadline_seconds > job.timeout_seconds:
        yield problem(
            "attempt_deadline_seconds",
            f"{job.attempt_deadline_seconds} s is longer than "
            f"timeout_seconds ({job.timeout_seconds} s): Scheduler would wait for an answer the "
            "function can no longer give",
            f"set attempt_deadline_seconds <= {job.timeout_seconds}",
        )
    lease = int(job.env[LEASE_ENV]) if job.env.get(LEASE_ENV, "").isdigit() else job.lease_seconds
    if lease <= job.timeout_seconds:
        yield problem(
            "env",
            f"the lease ({lease} s) is not longer than timeout_seconds "
            f"({job.timeout_seconds} s): a live attempt would lose its claim and the run would "
            "run twice",
            f"remove {LEASE_ENV} from env (the stack then uses timeout_seconds + "
            f"{LEASE_MARGIN_SECONDS}) or set it above {job.timeout_seconds}",
        )
    gap = _shortest_gap_seconds(job)
    retries = job.retry.offsets_seconds(gap) if gap else []
    if gap and not job.next_run_catches_up and (not retries or retries[-1] <= lease):
        last = (
            f"the last retry comes {retries[-1]} s after the first attempt"
            if retries
            else "it has no retries"
        )
        yield problem(
            "retry",
            f"a run whose instance crashes after claiming it is never retried: its lease ({lease} s) "
            f"outlasts the retry window ({last}; the next run follows {gap} s later)",
            "raise retry.retry_count, retry.min_backoff_seconds or retry.max_backoff_seconds so a "
            "retry comes after the lease, or lower timeout_seconds; if the next run redoes the "
            "work, set next_run_catches_up=True",
        )
    window = retry_window_seconds(job)
    needed = max(window, lease)
    if job.retention_seconds < needed:
        yield problem(
            "retention_seconds",
            f"{job.retention_seconds} s is shorter than the job's retry window "
            f"({window} s) or lease ({lease} s): a late retry would find no record and run again",
            f"set retention_seconds >= {needed}",
        )


def _shortest_gap_seconds(job: Job) -> int | None:
    """Shortest time between two runs over the next 100, in the job's zone; None if unreadable."""
    if len(job.schedule.split()) != 5 or job.time_zone not in _time_zones():
        return None
    try:
        runs = CronSim(job.schedule, datetime(2026, 1, 1, tzinfo=ZoneInfo(job.time_zone)))
        times = [next(runs) for _ in range(100)]
    except (CronSimError, StopIteration):
        return None
    return int(min((later - earlier).total_seconds() for earlier, later in itertools.pairwise(times)))


def _source(job: Job, problem) -> Iterator[Problem]:
    """The function folder exists and defines the entry point."""
    main = job.source_dir / "main.py"
    if not main.is_file() or not (job.source_dir / "requirements.txt").is_file():
        yield problem(
            "source",
            f"functions/{job.source}/ needs main.py and requirements.txt",
            "point source at a folder under functions/ that has both",
        )
    elif not re.search(rf"^def {re.escape(job.entry_point)}\(", main.read_text(), re.MULTILINE):
        yield problem(
            "entry_point",
            f"functions/{job.source}/main.py defines no function {job.entry_point!r}",
            "set entry_point to the decorated handler's name",
        )


def _env(job: Job, problem) -> Iterator[Problem]:
    """Environment variable names, and the variables the stack owns."""
    for name in job.env:
        if not ENV_NAME.match(name):
            yield problem(
                "env",
                f"{name!r} is not a valid environment variable name",
                "use letters, digits and underscores, not starting with a digit",
            )
        if name in RESERVED_ENV or (name == LEASE_ENV and not job.env[name].isdigit()):
            yield problem(
                "env",
                f"{name} is set by the stack from the team and job config",
                f"remove {name} from env and set the matching team or job field",
            )


def _labels(team: str, job: str | None, labels: dict[str, str]) -> Iterator[Problem]:
    """GCP label rules."""
    for key, value in labels.items():
        if not LABEL_KEY.match(key) or not LABEL_VALUE.match(value):
            yield Problem(
                team,
                job,
                "labels",
                f"{key}={value!r} is not a valid GCP label",
                "use lowercase letters, digits, '_' and '-', at most 63 characters, keys "
                "starting with a letter",
            )
