"""A job's function: Cloud Run functions' limits (memory, runtime, instances), the function
folder (a deduplicated handler, and a requirements.txt listing what it and the bundled runonce
import), environment variable names and labels."""

from __future__ import annotations

from collections.abc import Iterator
from functools import cache
from pathlib import Path

from runonce import contract
from stacks.config import targets
from stacks.config.problem import Problem, ProblemAt
from stacks.config.team import FUNCTIONS_DIR, EventJob, Job
from stacks.contract import DEAD_LETTER_TOPIC_VARIABLE, JOB_VARIABLE, MAX_EVENT_AGE_VARIABLE
from stacks.validate import function_limits
from stacks.validate.entry_point import EVENT, handler_issue, lists_distribution, missing_requirements

# Set by the stack from the team and job config; a job may not override them. A job may only
# lengthen its lease with RUNONCE_LEASE_SECONDS (checked against the timeout in `windows` and `events`).
STACK_ENV = (
    contract.DATABASE_VARIABLE,
    contract.COLLECTION_VARIABLE,
    contract.RETENTION_VARIABLE,
    contract.PROJECT_VARIABLE,
    MAX_EVENT_AGE_VARIABLE,
    DEAD_LETTER_TOPIC_VARIABLE,
    JOB_VARIABLE,
    *targets.STACK_ENV,
)
LEASE_ENV = contract.LEASE_VARIABLE
PUBSUB_DISTRIBUTION = "google-cloud-pubsub"


def function_settings(job: Job | EventJob, problem: ProblemAt) -> Iterator[Problem]:
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


def source(job: Job, problem: ProblemAt) -> Iterator[Problem]:
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


def event_source(job: EventJob, problem: ProblemAt) -> Iterator[Problem]:
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


# Many jobs share one folder: parse each main.py and requirements.txt once per synth.
_handler_issue = cache(handler_issue)


@cache
def _missing_requirements(folder: Path) -> list[tuple[str, str]]:
    return missing_requirements(folder, FUNCTIONS_DIR / "runonce")


def environment(job: Job, problem: ProblemAt) -> Iterator[Problem]:
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


def job_labels(team: str, job: str | None, labels: dict[str, str], inherited: set[str]) -> Iterator[Problem]:
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
