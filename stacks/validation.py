"""Synth-time checks of the team config: every problem is collected, then reported once.

Each problem names the team, the job and the field, says what is wrong and how to fix it. The
checks cover Scheduler's and Cloud Run's own limits (pinned in `locations`, `function_limits` and
`cron_check`), the handler and its requirements (`entry_point`), the cross-layer rules runonce
depends on (lease, attempt deadline, retention and the retry window against the function timeout
and the next scheduled run) and the resource names the stacks derive, across every team file.
Files that do not load or hold values of the wrong type are reported by `team_files` first.
"""

from __future__ import annotations

import difflib
import itertools
import re
from collections import Counter, defaultdict
from collections.abc import Callable, Generator, Iterable, Iterator, Sequence
from datetime import datetime
from functools import cache
from pathlib import Path
from zoneinfo import ZoneInfo, available_timezones

from cronsim import CronSim, CronSimError

from stacks import function_limits, locations, naming
from stacks.config import sharing, targets
from stacks.config.problem import InvalidConfig, Problem
from stacks.config.sharing import crowded_start, shared_functions
from stacks.config.team import (
    EVENTARC,
    EVENTARC_MAX_EVENT_AGE_SECONDS,
    EVENTARC_RETENTION_SECONDS,
    FUNCTIONS_DIR,
    LEASE_MARGIN_SECONDS,
    MAX_RETRY_WINDOW_SECONDS,
    PUSH,
    EventJob,
    Job,
    PushRetry,
    Retry,
    Team,
)
from stacks.contract import DEAD_LETTER_TOPIC_VARIABLE, MAX_EVENT_AGE_VARIABLE
from stacks.cron_check import schedule_issue
from stacks.entry_point import EVENT, handler_issue, lists_distribution, missing_requirements
from stacks.quotas import declared_problems, quota_problems

__all__ = ["InvalidConfig", "Problem", "find_problems", "retry_window_seconds", "validate"]

MIN_ATTEMPT_DEADLINE = 15
MAX_ATTEMPT_DEADLINE = 30 * 60
MAX_HTTP_TIMEOUT = 3600
MAX_RETRY_COUNT = 5
MAX_BACKOFF = 3600
MAX_DOUBLINGS = 16
# Scheduler retries until both retry_count and max_retry_duration are used up; with a zero
# backoff and a duration that would be endless, so the replay stops here.
MAX_REPLAYED_RETRIES = 1000
PROJECT_ID = re.compile(r"^[a-z][a-z0-9-]{4,28}[a-z0-9]$")
DATABASE_ID = re.compile(r"^[a-z][a-z0-9-]{2,61}[a-z0-9]$")
COLLECTION_ID = re.compile(r"^[A-Za-z0-9_-]{1,100}$")
# Set by the stack from the team and job config; a job may not override them. A job may only
# lengthen its lease with RUNONCE_LEASE_SECONDS (checked against the timeout below).
STACK_ENV = (
    "RUNONCE_DATABASE",
    "RUNONCE_COLLECTION",
    "RUNONCE_RETENTION_SECONDS",
    "GOOGLE_CLOUD_PROJECT",
    MAX_EVENT_AGE_VARIABLE,
    DEAD_LETTER_TOPIC_VARIABLE,
    *targets.STACK_ENV,
)
LEASE_ENV = "RUNONCE_LEASE_SECONDS"
TEMPLATE_PLACEHOLDERS = {"name": "my-team", "project": "my-gcp-project"}
"""Values teams/_template.py ships with; a copy that still has them was not edited."""

ProblemAt = Callable[[str, str, str], Problem]


def validate(teams: Iterable[Team], files: Sequence[str] | None = None) -> None:
    """Raise InvalidConfig listing every problem in these teams; return if there is none."""
    found = find_problems(list(teams), files)
    if found:
        raise InvalidConfig(found)


def find_problems(teams: Sequence[Team], files: Sequence[str] | None = None) -> list[Problem]:
    """Every problem in these teams, each team's and job's in config order. `files` (parallel to
    `teams`) names each team's file in its problems and in the cross-team ones."""
    shown = list(files) if files is not None else [""] * len(teams)
    found = list(_across_teams(teams, shown))
    for team, file in zip(teams, shown, strict=True):
        problems = list(_team(team))
        for job in team.jobs:
            problems.extend(_job(team, job))
        for event_job in team.event_jobs:
            problems.extend(_event_job(team, event_job))
        problems.extend(_sharing(team))
        found.extend(_in_file(problem, file) for problem in problems)
    found.extend(quota_problems(teams, shown))
    return found


def retry_offsets_seconds(retry: Retry, attempt_seconds: int = 0) -> list[int]:
    """When Scheduler retries a run, in seconds after the first attempt started, if every attempt
    takes `attempt_seconds` and then fails, ignoring the next scheduled run. Each backoff starts
    when the previous attempt ends, and retries go on until both retry_count and
    max_retry_duration (0: none) are used up (Scheduler API reference, RetryConfig)."""
    offsets: list[int] = []
    at = 0
    while len(offsets) < MAX_REPLAYED_RETRIES:
        at += attempt_seconds + retry.backoff_seconds(len(offsets) + 1)
        if retry.exhausted(len(offsets), at):
            break
        offsets.append(at)
    return offsets


def retry_window_seconds(job: Job) -> int:
    """Longest time from a run's first attempt to the end of its last retry: every attempt takes
    the whole attempt deadline before it fails and the next backoff starts."""
    offsets = retry_offsets_seconds(job.retry, job.attempt_deadline_seconds)
    return (offsets[-1] if offsets else 0) + job.attempt_deadline_seconds


def _in_file(problem: Problem, file: str) -> Problem:
    if problem.file or not file:
        return problem
    return Problem(problem.team, problem.job, problem.field, problem.message, problem.fix, file)


def _across_teams(teams: Sequence[Team], files: list[str]) -> Iterator[Problem]:
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
        database = names == [f"Firestore database {team.database!r}"]
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
    for field, placeholder in TEMPLATE_PLACEHOLDERS.items():
        if getattr(team, field) == placeholder:
            yield problem(
                field,
                f"{placeholder!r} is the template's placeholder",
                f"set {field} to your own {'team name' if field == 'name' else 'GCP project id'}",
            )
    placeholder_labels = [
        key for key, value in team.labels.items() if value in TEMPLATE_PLACEHOLDERS.values()
    ]
    if placeholder_labels:
        yield problem(
            "labels",
            f"label {placeholder_labels[0]!r} still has the template's placeholder value",
            f"set labels[{placeholder_labels[0]!r}] to your own value",
        )
    yield from _region(team, problem)
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
    if not team.jobs and not team.event_jobs:
        yield problem(
            "jobs",
            "the team has no jobs",
            "add at least one Job(...) or EventJob(...) or delete the team file",
        )
    names = [job.name for job in team.jobs] + [job.name for job in team.event_jobs]
    for name, count in Counter(names).items():
        if count > 1:
            yield Problem(
                team.name,
                name,
                "name",
                f"{count} jobs share this name (scheduled and event jobs together; it names the "
                "function and its account)",
                "give every job of a team its own name",
            )
    yield from _labels(team.name, None, team.labels, set())
    yield from declared_problems(team)


def _sharing(team: Team) -> Iterator[Problem]:
    """Jobs sharing a function must not start more requests at once than it has instances."""
    for function in shared_functions(team):
        crowded = crowded_start(function)
        if crowded is None:
            continue
        limit = function.settings.max_instances
        starting = [job.name for job in crowded.jobs]
        yield Problem(
            team.name,
            starting[-1],
            "max_instances",
            f"jobs {sharing.names(function.job_names)} share the function "
            f"{naming.function_name(team.name, function.name)} (same {function.settings.code} and "
            f"settings), and {len(starting)} of them ({sharing.names(starting)}) start at "
            f"{crowded.at:%a %H:%M} UTC: an instance serves one request at a time and the "
            f"function has max_instances={limit}, so the deliveries beyond the first {limit} wait "
            "at most 10 s for an instance and are then refused (429), spending the retries a "
            "crashed run needs",
            f"set max_instances={crowded.peak} on all {len(function.jobs)} of them (they keep "
            "sharing one function), start some of them in another minute, or give one a "
            "different setting so that it gets a function of its own",
        )


def _region(team: Team, problem: ProblemAt) -> Iterator[Problem]:
    """The region offers functions and Scheduler; the Firestore location exists."""
    if team.region not in locations.TEAM_REGIONS:
        if team.region in locations.FUNCTION_REGIONS | locations.SCHEDULER_REGIONS:
            missing = (
                "Cloud Scheduler" if team.region in locations.FUNCTION_REGIONS else "Cloud Run functions"
            )
            message = f"{team.region!r} does not offer {missing} (pinned lists in stacks/locations.py)"
        else:
            message = f"{team.region!r} is not a region that offers Cloud Run functions and Cloud Scheduler"
        yield problem(
            "region",
            message,
            f"use one of {_closest(team.region, locations.TEAM_REGIONS)}; if Google lists it now "
            f"({locations.LOCATIONS_PAGES}), add it to stacks/locations.py",
        )
    field = "database_location" if team.database_location else "region"
    if team.location not in locations.FIRESTORE_LOCATIONS and (
        team.database_location or team.region in locations.TEAM_REGIONS
    ):
        yield problem(
            field,
            f"{team.location!r} is not a Firestore location",
            f"set database_location to one of {_closest(team.location, locations.FIRESTORE_LOCATIONS)} "
            "(multi-regions: eur3, nam5, nam7)",
        )


def _closest(value: str, known: Iterable[str]) -> str:
    close = difflib.get_close_matches(value, sorted(known), n=3, cutoff=0.6)
    return ", ".join(repr(name) for name in close) if close else "the regions in stacks/locations.py"


def _job(team: Team, job: Job) -> Iterator[Problem]:
    """One job's fields, Scheduler's and Cloud Run's limits and the cross-layer rules."""

    def problem(field: str, message: str, fix: str) -> Problem:
        return Problem(team.name, job.name, field, message, fix)

    yield from _job_name(team, job.name, problem)
    yield from _schedule(job, problem)
    ranges = [*_limits(job, problem), *_retry(job.retry, problem)]
    yield from ranges
    if not ranges:  # cross-layer rules only make sense (and give sane hints) on in-range values
        yield from _cross_layer(job, problem)
    if (yield from _code(job, problem)):
        yield from _source(job, problem)
    yield from _env(job, problem)
    yield from _labels(team.name, job.name, job.labels, set(team.labels))


def _job_name(team: Team, name: str, problem: ProblemAt) -> Iterator[Problem]:
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


def _schedule(job: Job, problem: ProblemAt) -> Iterator[Problem]:
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


def _limits(job: Job, problem: ProblemAt) -> Iterator[Problem]:
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
            f"choose {max(MIN_ATTEMPT_DEADLINE, min(job.attempt_deadline_seconds, MAX_ATTEMPT_DEADLINE))}"
            f"-{MAX_HTTP_TIMEOUT} s (at least the attempt deadline; split longer work)",
        )
    yield from _function_settings(job, problem)


def _function_settings(job: Job | EventJob, problem: ProblemAt) -> Iterator[Problem]:
    """Memory, runtime and instances: Cloud Run functions' own limits, for either kind of job."""
    if job.memory not in function_limits.MEMORY_SIZES:
        yield problem(
            "memory",
            f"{job.memory!r} is not a memory size of Cloud Run functions",
            f"use one of {', '.join(function_limits.MEMORY_SIZES)}",
        )
    if job.runtime not in function_limits.PYTHON_RUNTIMES:
        yield problem(
            "runtime",
            f"{job.runtime!r} is not a supported Python runtime of Cloud Run functions (runonce "
            "is Python, so the function must be too)",
            f"use one of {', '.join(function_limits.PYTHON_RUNTIMES)}",
        )
    if job.min_instances < 0 or job.max_instances < 1 or job.min_instances > job.max_instances:
        yield problem(
            "min_instances",
            f"min_instances={job.min_instances}, max_instances={job.max_instances} is not a valid range",
            "use 0 <= min_instances <= max_instances and max_instances >= 1",
        )


def _retry(retry: Retry, problem: ProblemAt) -> Iterator[Problem]:
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


def _cross_layer(job: Job, problem: ProblemAt) -> Iterator[Problem]:
    """Scheduler, function and ledger settings that must agree for exactly-once to hold."""
    if job.attempt_deadline_seconds > job.timeout_seconds:
        yield problem(
            "attempt_deadline_seconds",
            f"{job.attempt_deadline_seconds} s is longer than "
            f"timeout_seconds ({job.timeout_seconds} s): Scheduler would wait for an answer the "
            "function can no longer give",
            f"set attempt_deadline_seconds <= {job.timeout_seconds}"
            if job.timeout_seconds >= MIN_ATTEMPT_DEADLINE
            else f"raise timeout_seconds to at least {job.attempt_deadline_seconds} (attempt "
            f"deadlines start at {MIN_ATTEMPT_DEADLINE} s)",
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
    if gap:
        yield from _retries_and_next_run(job, lease, gap, problem)
    window = retry_window_seconds(job)
    needed = max(window, lease)
    if job.retention_seconds < needed:
        yield problem(
            "retention_seconds",
            f"{job.retention_seconds} s is shorter than the job's retry window "
            f"({window} s) or lease ({lease} s): a late retry would find no record and run again",
            f"set retention_seconds >= {needed}",
        )


def _retries_and_next_run(job: Job, lease: int, gap: int, problem: ProblemAt) -> Iterator[Problem]:
    """The retry window must reach past the lease (a crashed run is taken over) and end before
    the next scheduled run (Scheduler may skip that run, or stop the retries, if they overlap)."""
    retry, deadline = job.retry, job.attempt_deadline_seconds
    if not job.next_run_catches_up:
        if lease + deadline >= gap:
            yield problem(
                "retry",
                f"no retry can both come after the lease ({lease} s, so a crashed run is taken "
                f"over) and end, {deadline} s later, before the next run {gap} s after the first "
                "attempt",
                "lower timeout_seconds (the lease is timeout + 60 s) or attempt_deadline_seconds, "
                "schedule the job less often, or, if the next run redoes the work, set "
                "next_run_catches_up=True",
            )
        else:
            before_next = [offset for offset in retry_offsets_seconds(retry) if offset < gap]
            if not before_next or before_next[-1] <= lease:
                last = (
                    f"the last retry comes {before_next[-1]} s after the first attempt"
                    if before_next
                    else "no retry comes before the next run"
                )
                yield problem(
                    "retry",
                    f"a run whose instance crashes after claiming it is never retried: its lease "
                    f"({lease} s) outlasts the retry window ({last}; the next run follows {gap} s "
                    "later)",
                    f"{_later_retry_levers(job, lease, gap)}; if the next run redoes the work, set "
                    "next_run_catches_up=True",
                )
    offsets = retry_offsets_seconds(retry, deadline)
    if offsets and offsets[-1] + deadline >= gap and not job.retries_may_skip_next_run:
        yield problem(
            "retry",
            f"when every attempt runs into its {deadline} s deadline, the last retry starts "
            f"{offsets[-1]} s after the first attempt and may run until {offsets[-1] + deadline} s, "
            f'reaching the next scheduled run {gap} s later: Google\'s "Retry jobs" '
            'page says that run "might be skipped if the retries continue through that time", '
            "and the API reference says retries stop at the next run, so either a run or a retry "
            "is lost",
            f"make the last retry end before {gap} s ({_fewer_retry_levers(retry)}), or set "
            "retries_may_skip_next_run=True if a skipped run is acceptable",
        )


def _later_retry_levers(job: Job, lease: int, gap: int) -> str:
    """What can move a retry past the lease, leaving out settings already at their limit."""
    retry = job.retry
    levers = []
    if retry.backoff_seconds(1) >= gap - job.attempt_deadline_seconds:
        levers.append("lower retry.min_backoff_seconds")  # even the first retry is too late
    else:
        if retry.retry_count < MAX_RETRY_COUNT:
            levers.append("raise retry.retry_count")
        if retry.min_backoff_seconds < MAX_BACKOFF:
            levers.append("raise retry.min_backoff_seconds")
        if retry.max_backoff_seconds < MAX_BACKOFF:
            levers.append("raise retry.max_backoff_seconds")
    levers.append("lower timeout_seconds")
    return (
        f"make a retry come between {lease} s and {gap - job.attempt_deadline_seconds} s after "
        f"the first attempt ({', '.join(levers)})"
    )


def _fewer_retry_levers(retry: Retry) -> str:
    levers = []
    if retry.retry_count > 0:
        levers.append("lower retry.retry_count")
    if retry.max_backoff_seconds > 0:
        levers.append("lower retry.max_backoff_seconds")
    if retry.max_retry_duration_seconds > 0:
        levers.append("lower retry.max_retry_duration_seconds")
    return ", ".join(levers)


def _shortest_gap_seconds(job: Job) -> int | None:
    """Shortest time between two runs over the next 100, in the job's zone; None if unreadable."""
    if schedule_issue(job.schedule) or job.time_zone not in _time_zones():
        return None
    try:
        runs = CronSim(job.schedule, datetime(2026, 1, 1, tzinfo=ZoneInfo(job.time_zone)))
        times = [next(runs) for _ in range(100)]
    except (CronSimError, StopIteration):
        return None
    return int(min((later - earlier).total_seconds() for earlier, later in itertools.pairwise(times)))


def _code(job: Job, problem: ProblemAt) -> Generator[Problem, None, bool]:
    """The job names its own code or a Google API target, and a target fits the proxy that starts
    it; returns whether there is a function folder to check."""
    target = job.target
    if target is None:
        if not job.source:
            yield problem(
                "source",
                "the job names neither source (its folder under functions/) nor target (a Google API)",
                'set source="<folder>" or target=Workflow(...) (stacks/targets.py)',
            )
            return False
        return True
    if job.source:
        yield problem(
            "target",
            f"the job names both source ({job.source!r}) and a target: a target job runs the "
            "idempotent proxy shipped with runonce, not the team's code",
            "remove source= (or target=)",
        )
    if job.entry_point != Job.entry_point:
        yield problem("entry_point", "a target job runs the proxy's `handle`", "remove entry_point=")
    if job.body:
        yield problem(
            "body",
            "the proxy does not read the request body: its target is fixed when it is deployed",
            "move the data into the target (argument, overrides, substitutions or body)",
        )
    for field, message, fix in targets.target_problems(target):
        yield problem(field, message, fix)
    raw = job.env.get(targets.CALL_TIMEOUT_ENV, str(targets.CALL_TIMEOUT_SECONDS))
    if not raw.isdigit() or int(raw) < 1:
        yield problem(
            "env", f"{targets.CALL_TIMEOUT_ENV}={raw!r} is not a whole number of seconds", "give it 1 or more"
        )
        return True
    worst = targets.CALLS_PER_ATTEMPT * int(raw)
    if job.attempt_deadline_seconds < worst:
        yield problem(
            "attempt_deadline_seconds",
            f"{job.attempt_deadline_seconds} s is shorter than one proxy attempt can take: up to "
            f"{targets.CALLS_PER_ATTEMPT} calls to the API (look for an earlier start, start, look "
            f"again after a lost answer) of at most {raw} s each, {worst} s. Scheduler would give "
            "up and retry while the attempt still waits on the API, and the function could be "
            "stopped after the API started the target but before the run is recorded",
            f"set attempt_deadline_seconds (and timeout_seconds) to at least {worst}, or lower "
            f"{targets.CALL_TIMEOUT_ENV} in env",
        )
    return True


def _source(job: Job, problem: ProblemAt) -> Iterator[Problem]:
    """The function folder exists, its entry point is a deduplicated handler, and its
    requirements.txt lists what the handler and the bundled runonce import."""
    main = job.source_dir / "main.py"
    if not main.is_file() or not (job.source_dir / "requirements.txt").is_file():
        yield problem(
            "source",
            f"functions/{job.code_source}/ needs main.py and requirements.txt",
            "point source at a folder under functions/ that has both",
        )
        return
    issue = _handler_issue(main, job.entry_point)
    if issue:
        yield problem("entry_point", issue.message, issue.fix)
    for name, distribution in _missing_requirements(job.source_dir):
        yield problem(
            "source",
            f"functions/{job.code_source}/requirements.txt does not list {distribution}, which "
            f"`import {name}` needs: the function would fail at its first start",
            f"add a pinned {distribution}==<version> line to functions/{job.code_source}/requirements.txt",
        )


# Many jobs share one folder: parse each main.py and requirements.txt once per synth.
_handler_issue = cache(handler_issue)


@cache
def _missing_requirements(folder: Path) -> list[tuple[str, str]]:
    return missing_requirements(folder, FUNCTIONS_DIR / "runonce")


def _env(job: Job, problem: ProblemAt) -> Iterator[Problem]:
    """Environment variable names: valid, not Cloud Run's, and not the ones the stack owns."""
    for name in job.env:
        if not function_limits.ENV_NAME.match(name):
            yield problem(
                "env",
                f"{name!r} is not a valid environment variable name",
                "use letters, digits and underscores, not starting with a digit",
            )
        elif name in function_limits.RESERVED_ENV or name.startswith(function_limits.RESERVED_ENV_PREFIXES):
            yield problem(
                "env",
                f"{name} is reserved by Cloud Run (its container runtime contract sets it), so the "
                "deployment would be rejected",
                f"rename {name} (e.g. APP_{name.removeprefix('X_GOOGLE_')})",
            )
        if name in STACK_ENV or (name == LEASE_ENV and not job.env[name].isdigit()):
            yield problem(
                "env",
                f"{name} is set by the stack from the team and job config",
                f"remove {name} from env and set the matching team or job field",
            )


def _labels(team: str, job: str | None, labels: dict[str, str], inherited: set[str]) -> Iterator[Problem]:
    """GCP label rules: format, Google's goog- prefix, runonce's own keys, and at most 64 in all
    (a job's labels are merged over the `inherited` team labels)."""
    for key, value in labels.items():
        google = key.startswith(function_limits.RESERVED_LABEL_PREFIX)
        if google or key in function_limits.RESERVED_RUNONCE_LABELS:
            owner = "Google reserves the goog- prefix" if google else "the stack sets it"
            yield Problem(
                team,
                job,
                "labels",
                f"{key!r} is a reserved label key ({owner})",
                f"rename the label {key!r}",
            )
        elif not function_limits.LABEL_KEY.match(key) or not function_limits.LABEL_VALUE.match(value):
            yield Problem(
                team,
                job,
                "labels",
                f"{key}={value!r} is not a valid GCP label",
                "use lowercase letters, digits, '_' and '-', at most 63 characters, keys "
                "starting with a letter",
            )
    room = function_limits.MAX_LABELS - len(function_limits.RUNONCE_LABELS)
    merged = inherited | set(labels)
    if len(merged) > room and len(inherited) <= room:  # a team already over is reported once
        yield Problem(
            team,
            job,
            "labels",
            f"{len(merged)} labels (team and job together); a resource takes at most "
            f"{function_limits.MAX_LABELS}, and runonce adds {len(function_limits.RUNONCE_LABELS)}",
            f"keep at most {room} labels",
        )


# Pub/Sub push: the ack deadline is at most 600 s (it also is the push request's timeout), a
# backoff 0-600 s, retention 10 min to 7 days, dead-letter attempts 5-100 (Pub/Sub's
# Subscription reference: ackDeadlineSeconds, RetryPolicy, messageRetentionDuration,
# DeadLetterPolicy). A topic id: 3-255 characters, starting with a letter, not "goog".
MIN_ACK_DEADLINE, MAX_ACK_DEADLINE = 10, 600
MAX_PUSH_BACKOFF = 600
MIN_RETRY_WINDOW = 600
MIN_DELIVERY_ATTEMPTS, MAX_DELIVERY_ATTEMPTS = 5, 100
TOPIC_ID = re.compile(r"^(?!goog)[A-Za-z][A-Za-z0-9._~%+-]{2,254}$")
PUBSUB_DISTRIBUTION = "google-cloud-pubsub"
# Event-driven gen2 functions (an Eventarc trigger) time out after at most 540 s.
MAX_EVENT_FUNCTION_TIMEOUT = 540
BUCKET_NAME = re.compile(r"^[a-z0-9][a-z0-9._-]{1,220}[a-z0-9]$")


def _event_job(team: Team, job: EventJob) -> Iterator[Problem]:
    """One event job: its names, Pub/Sub's ranges, the cross-layer rules and its handler."""

    def problem(field: str, message: str, fix: str) -> Problem:
        return Problem(team.name, job.name, field, message, fix)

    yield from _job_name(team, job.name, problem)
    if job.topic and not TOPIC_ID.match(job.topic):
        yield problem(
            "topic",
            f"{job.topic!r} is not a Pub/Sub topic id",
            'give the id of a topic in the team\'s project (not the projects/P/topics/ path), or "" '
            "to let the stack create one",
        )
    yield from _trigger(job, problem)
    ranges = [*_push_ranges(job, problem), *_function_settings(job, problem)]
    yield from ranges
    if not ranges:
        yield from _event_cross_layer(job, problem)
    yield from _event_source(job, problem)
    yield from _env(job.function_job({}), problem)
    yield from _labels(team.name, job.name, job.labels, set(team.labels))


def _trigger(job: EventJob, problem: ProblemAt) -> Iterator[Problem]:
    """The trigger kind, and what an Eventarc trigger needs."""
    if job.trigger not in (PUSH, EVENTARC):
        yield problem("trigger", f"{job.trigger!r} is not a trigger kind", f'use "{PUSH}" or "{EVENTARC}"')
        return
    if job.trigger == PUSH and job.bucket_location:
        yield problem("bucket_location", "a push job has no bucket", "remove bucket_location=")
    if job.trigger == PUSH and job.bucket:
        yield problem(
            "bucket",
            "a push subscription delivers a topic's messages, not a bucket's events",
            f'set trigger="{EVENTARC}" for Cloud Storage events, or remove bucket=',
        )
    if job.trigger != EVENTARC:
        return
    if job.bucket and job.topic:
        yield problem("topic", "an Eventarc trigger listens to a bucket or a topic, not both", "remove one")
    if job.bucket and not BUCKET_NAME.match(job.bucket):
        yield problem(
            "bucket", f"{job.bucket!r} is not a Cloud Storage bucket name", "give the bucket's name"
        )
    yield from _bucket_location(job, problem)
    if job.timeout_seconds > MAX_EVENT_FUNCTION_TIMEOUT:
        yield problem(
            "timeout_seconds",
            f"{job.timeout_seconds} s is longer than an event-driven function may run "
            f"({MAX_EVENT_FUNCTION_TIMEOUT} s)",
            f"choose at most {MAX_EVENT_FUNCTION_TIMEOUT} s, or use the push trigger (600 s)",
        )


def _bucket_location(job: EventJob, problem: ProblemAt) -> Iterator[Problem]:
    """A Cloud Storage trigger must be in its bucket's location (a region, dual- or
    multi-region); a Pub/Sub trigger only in a single region, the team's."""
    if not job.bucket_location:
        return
    if not job.bucket:
        yield problem(
            "bucket_location",
            "only a Cloud Storage trigger takes its bucket's location; a Pub/Sub trigger is in a single "
            "region, the team's",
            "remove bucket_location=",
        )
    elif job.bucket_location not in locations.STORAGE_TRIGGER_LOCATIONS:
        lowered = job.bucket_location.lower()
        close = (
            f"write it in lower case, {lowered!r}"
            if lowered in locations.STORAGE_TRIGGER_LOCATIONS
            else f"use one of {_closest(lowered, locations.STORAGE_TRIGGER_LOCATIONS)}"
        )
        yield problem(
            "bucket_location",
            f"{job.bucket_location!r} is not a location a Cloud Storage trigger can be in (a region, "
            f"or one of {', '.join(sorted(locations.STORAGE_TRIGGER_MULTI_REGIONS))})",
            f"give the bucket's location: {close}; if Eventarc lists it now, add it to stacks/locations.py",
        )


def _push_ranges(job: EventJob, problem: ProblemAt) -> Iterator[Problem]:
    """Pub/Sub's own limits on the settings an event job gives."""
    if not MIN_ACK_DEADLINE <= job.timeout_seconds <= MAX_ACK_DEADLINE:
        yield problem(
            "timeout_seconds",
            f"{job.timeout_seconds} s cannot be the push subscription's ack deadline, which the "
            f"stack derives from it: a push ack deadline is {MIN_ACK_DEADLINE}-{MAX_ACK_DEADLINE} s, "
            "and a push still running after it is redelivered",
            f"choose {MIN_ACK_DEADLINE}-{MAX_ACK_DEADLINE} s (split longer work into more events)",
        )
    retry: PushRetry = job.retry
    for field, value in (
        ("min_backoff_seconds", retry.min_backoff_seconds),
        ("max_backoff_seconds", retry.max_backoff_seconds),
    ):
        yield from _pubsub_range(problem, f"retry.{field}", value, 0, MAX_PUSH_BACKOFF, "backoff", " s")
    if retry.min_backoff_seconds > retry.max_backoff_seconds:
        yield problem(
            "retry.min_backoff_seconds",
            f"{retry.min_backoff_seconds} s is above max_backoff_seconds ({retry.max_backoff_seconds} s)",
            "make min_backoff_seconds <= max_backoff_seconds",
        )
    yield from _pubsub_range(
        problem,
        "retry_window_seconds",
        job.retry_window_seconds,
        MIN_RETRY_WINDOW,
        MAX_RETRY_WINDOW_SECONDS,
        "message retention",
        " s",
        " (10 minutes to 7 days)",
    )
    yield from _pubsub_range(
        problem,
        "max_delivery_attempts",
        job.max_delivery_attempts,
        MIN_DELIVERY_ATTEMPTS,
        MAX_DELIVERY_ATTEMPTS,
        "dead-letter",
    )
    if job.max_event_age_seconds < 1:
        yield problem(
            "max_event_age_seconds",
            f"{job.max_event_age_seconds} s is not a positive age",
            "give 1 or more seconds",
        )


def _pubsub_range(
    problem: ProblemAt,
    field: str,
    value: int,
    low: int,
    high: int,
    what: str,
    unit: str = "",
    note: str = "",
) -> Iterator[Problem]:
    """`value` outside Pub/Sub's `what` range `low`-`high`, with that range as the fix."""
    if not low <= value <= high:
        yield problem(
            field,
            f"{value}{unit} is outside Pub/Sub's {what} range {low}-{high}{unit}{note}",
            f"choose {low}-{high}",
        )


def _event_cross_layer(job: EventJob, problem: ProblemAt) -> Iterator[Problem]:
    """Subscription, function and ledger settings that must agree for exactly-once to hold."""
    lease = int(job.env[LEASE_ENV]) if job.env.get(LEASE_ENV, "").isdigit() else job.lease_seconds
    if lease <= job.ack_deadline_seconds:
        yield problem(
            "env",
            f"the lease ({lease} s) is not longer than the ack deadline ({job.ack_deadline_seconds} s, "
            "the timeout): Pub/Sub redelivers a push still running at its ack deadline, and that "
            "redelivery would take over the live attempt's claim and run the event twice",
            f"remove {LEASE_ENV} from env (the stack then uses timeout_seconds + "
            f"{LEASE_MARGIN_SECONDS}) or set it above {job.ack_deadline_seconds}",
        )
    if job.trigger == EVENTARC:
        yield from _eventarc_event_age(job, problem)
    else:
        yield from _push_attempts_outlast_lease(job, lease, problem)
    if job.trigger != EVENTARC and job.max_event_age_seconds > job.retry_window_seconds:
        yield problem(
            "max_event_age_seconds",
            f"{job.max_event_age_seconds} s is longer than the retry window "
            f"({job.retry_window_seconds} s): Pub/Sub drops a message at the end of its retention, "
            "so an event failing until then would vanish instead of being dead-lettered as too old",
            f"set max_event_age_seconds <= {job.retry_window_seconds} (or lengthen retry_window_seconds)",
        )
    needed = max(job.retry_window_seconds, lease)
    if job.retention_seconds <= needed:
        yield problem(
            "retention_seconds",
            f"{job.retention_seconds} s does not outlast the retry window ({job.retry_window_seconds} s) "
            f"and the lease ({lease} s): a late redelivery would find no record and run again",
            f"set retention_seconds > {needed}",
        )


def _push_attempts_outlast_lease(job: EventJob, lease: int, problem: ProblemAt) -> Iterator[Problem]:
    """A crashed attempt's push fails at once and leaves its claim leased: every redelivery
    within the lease is answered 409, so the last delivery attempt must come after the lease,
    or Pub/Sub dead-letters an event whose body never finished, with no runonce reason. Checked
    on `PushRetry.attempt_offsets_seconds`, which takes every wait as the minimum backoff."""
    reach = lease + job.retry.max_backoff_seconds
    if job.retry_window_seconds <= reach:
        # After the lease ends, the next delivery comes at most one maximum backoff later.
        yield problem(
            "retry_window_seconds",
            f"{job.retry_window_seconds} s of message retention may end before a redelivery comes "
            f"after the lease ({lease} s) of an attempt whose instance died at the first delivery: "
            f"that redelivery may wait up to retry.max_backoff_seconds ({job.retry.max_backoff_seconds} s) "
            "more, and Pub/Sub drops the message unacknowledged, with no dead letter",
            f"set retry_window_seconds above {reach}, or lower retry.max_backoff_seconds",
        )
    attempts, backoff = job.max_delivery_attempts, job.retry.min_backoff_seconds
    last = job.retry.attempt_offsets_seconds(attempts)[-1]
    if last > lease:
        return
    fixes = []
    needed_attempts = lease // backoff + 2 if backoff else MAX_DELIVERY_ATTEMPTS + 1
    if needed_attempts <= MAX_DELIVERY_ATTEMPTS:
        fixes.append(f"raise max_delivery_attempts to {needed_attempts}")
    needed_backoff = lease // (attempts - 1) + 1
    if needed_backoff <= min(MAX_PUSH_BACKOFF, job.retry.max_backoff_seconds):
        fixes.append(f"raise retry.min_backoff_seconds to {needed_backoff}")
    fixes.append(f"lower timeout_seconds (the lease is timeout + {LEASE_MARGIN_SECONDS} s)")
    yield problem(
        "max_delivery_attempts",
        f"{attempts} delivery attempts {backoff} s apart (the minimum backoff, all Pub/Sub "
        f"promises) end {last} s after the first, within the lease ({lease} s): when an attempt's "
        "instance dies, its push fails at once and every redelivery meets the held claim (409), so "
        "Pub/Sub dead-letters the event before the lease lets one take it over, with no runonce "
        "reason",
        f"make the last attempt come after {lease} s: {', or '.join(fixes)}",
    )


def _eventarc_event_age(job: EventJob, problem: ProblemAt) -> Iterator[Problem]:
    """Eventarc drops an event it could not deliver in 24 hours; runonce dead-letters a too old
    event only when a delivery comes after `max_event_age_seconds`, so the age leaves room for
    redeliveries before that end."""
    if job.max_event_age_seconds > EVENTARC_MAX_EVENT_AGE_SECONDS:
        yield problem(
            "max_event_age_seconds",
            f"{job.max_event_age_seconds} s is not well under the {EVENTARC_RETENTION_SECONDS} s "
            "(24 hours) Eventarc keeps an undelivered event: an event still failing then is dropped "
            "(Eventarc's trigger has no dead-letter topic) before runonce can dead-letter it as "
            "too old",
            f"set max_event_age_seconds <= {EVENTARC_MAX_EVENT_AGE_SECONDS} (23 hours, six of "
            "Eventarc's longest redelivery gaps under its retention)",
        )


def _event_source(job: EventJob, problem: ProblemAt) -> Iterator[Problem]:
    """The folder has an `@deduplicated_event` handler and lists what it needs, google-cloud-pubsub
    included: runonce imports it only when it forwards a dead letter, so no import shows it."""
    main = job.source_dir / "main.py"
    if not job.source or not main.is_file() or not (job.source_dir / "requirements.txt").is_file():
        yield problem(
            "source",
            f"functions/{job.source}/ needs main.py and requirements.txt",
            "point source at a folder under functions/ that has both",
        )
        return
    issue = _handler_issue(main, job.entry_point, EVENT)
    if issue:
        yield problem("entry_point", issue.message, issue.fix)
    missing = _missing_requirements(job.source_dir)
    reported = {distribution for _, distribution in missing}
    if PUBSUB_DISTRIBUTION not in reported and not lists_distribution(job.source_dir, PUBSUB_DISTRIBUTION):
        missing = [*missing, ("google.cloud.pubsub_v1", PUBSUB_DISTRIBUTION)]
    for name, distribution in missing:
        yield problem(
            "source",
            f"functions/{job.source}/requirements.txt does not list {distribution}, which "
            f"`import {name}` needs: the function would fail when it first loads it",
            f"add a pinned {distribution}==<version> line to functions/{job.source}/requirements.txt",
        )
