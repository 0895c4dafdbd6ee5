"""Google API targets: a job names its own code or a target, and a target fits the proxy that
starts it (its resource name, its JSON, and an attempt deadline that covers the proxy's calls)."""

from __future__ import annotations

import json
import re
from collections.abc import Generator, Iterator
from typing import Any

from runonce.targets.schema import problems as schema_problems
from stacks.config.problem import Problem, ProblemAt
from stacks.config.targets import (
    CALL_TIMEOUT_ENV,
    CALL_TIMEOUT_SECONDS,
    CALLS_PER_ATTEMPT,
    GRACE_MARGIN_SECONDS,
    SERVICE_ACCOUNT_EMAIL,
    BuildTrigger,
    GoogleApi,
    Target,
)
from stacks.config.team import Job
from stacks.contract import TARGET_GRACE_VARIABLE as GRACE_ENV
from stacks.validate.functions import LEASE_ENV
from stacks.validate.schedules import shortest_gap_seconds
from stacks.validate.windows import retry_offsets_seconds


def code(job: Job, problem: ProblemAt) -> Generator[Problem, None, bool]:
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
    for field, message, fix in target_problems(target):
        yield problem(field, message, fix)
    raw = job.env.get(CALL_TIMEOUT_ENV, str(CALL_TIMEOUT_SECONDS))
    if not raw.isdigit() or int(raw) < 1:
        yield problem(
            "env", f"{CALL_TIMEOUT_ENV}={raw!r} is not a whole number of seconds", "give it 1 or more"
        )
        return True
    worst = CALLS_PER_ATTEMPT * int(raw)
    if job.attempt_deadline_seconds < worst:
        yield problem(
            "attempt_deadline_seconds",
            f"{job.attempt_deadline_seconds} s is shorter than one proxy attempt can take: up to "
            f"{CALLS_PER_ATTEMPT} calls to the API (look for an earlier start, start, look "
            f"again after a lost answer) of at most {raw} s each, {worst} s. Scheduler would give "
            "up and retry while the attempt still waits on the API, and the function could be "
            "stopped after the API started the target but before the run is recorded",
            f"set attempt_deadline_seconds (and timeout_seconds) to at least {worst}, or lower "
            f"{CALL_TIMEOUT_ENV} in env",
        )
    yield from _grace(job, int(raw), problem)
    return True


def _grace(job: Job, timeout: int, problem: ProblemAt) -> Iterator[Problem]:
    """The proxy's grace (docs/targets.md, "the grace") fits the job: a held run keeps its claim
    for the grace, so the grace must not outlast the lease, and only a Scheduler retry after the
    grace looks for the start and finishes the run."""
    raw = job.env.get(GRACE_ENV)
    if raw is None:
        grace = float(timeout + GRACE_MARGIN_SECONDS)
    else:
        try:
            grace = float(raw)
        except ValueError:
            grace = 0.0
        if not grace > 0:
            yield problem(
                "env", f"{GRACE_ENV}={raw!r} is not a number of seconds above 0", "give it 1 or more"
            )
            return
    lease = int(job.env[LEASE_ENV]) if job.env.get(LEASE_ENV, "").isdigit() else job.lease_seconds
    source = (
        f"{GRACE_ENV}={raw}"
        if raw is not None
        else f"the call timeout ({timeout} s) + {GRACE_MARGIN_SECONDS} s"
    )
    if grace > lease:
        yield problem(
            "env",
            f"the proxy's grace ({grace:g} s, {source}) is longer than the lease ({lease} s): a "
            "run held after a start of unknown outcome would keep its claim longer than any "
            "attempt may hold it",
            f"lower {GRACE_ENV} (or {CALL_TIMEOUT_ENV}) to at most {lease} s, or raise timeout_seconds",
        )
    gap = shortest_gap_seconds(job)
    if gap and not job.next_run_catches_up and grace <= lease:
        return  # windows.cross_layer requires a retry after the lease, which is after the grace
    offsets = [offset for offset in retry_offsets_seconds(job.retry) if not gap or offset < gap]
    if not offsets or offsets[-1] <= grace:
        last = (
            f"the last retry comes {offsets[-1]} s after the first attempt" if offsets else "no retry comes"
        )
        yield problem(
            "retry",
            f"a run held for the proxy's grace ({grace:g} s, {source}) is never finished: "
            f"{last}{' before the next run' if gap else ''}, and only a retry after the grace "
            "looks for the start",
            f"make a retry come later than {grace:g} s after the first attempt (raise "
            f"retry.retry_count or retry.min_backoff_seconds), or lower {GRACE_ENV}",
        )


ROLE = re.compile(
    r"^(roles/[A-Za-z0-9_.]+|projects/[^/]+/roles/[A-Za-z0-9_.]+|organizations/[0-9]+/roles/[A-Za-z0-9_.]+)$"
)


def target_problems(target: Target) -> list[tuple[str, str, str]]:
    """(field, message, fix) for every way the target cannot be started: the proxy's own check of
    its JSON form (`runonce.targets.schema.problems`), then what only the stack reads."""
    config = target.as_json()
    unencodable = [name for name, value in config.items() if not _is_json(value)]
    found = [
        (f"target.{name}", "is not JSON", "use dicts, lists, strings, numbers, booleans and None")
        for name in unencodable
    ]
    if not found:
        found = [(f"target.{each.field}", each.message, each.fix) for each in schema_problems(config)]
    if isinstance(target, GoogleApi) and not (isinstance(target.role, str) and ROLE.match(target.role)):
        found.append(
            (
                "target.role",
                f"{target.role!r} is not an IAM role",
                'name the role the call needs, e.g. "roles/pubsub.publisher"',
            )
        )
    if (
        isinstance(target, BuildTrigger)
        and target.service_account
        and not SERVICE_ACCOUNT_EMAIL.match(target.service_account)
    ):
        found.append(
            (
                "target.service_account",
                f"{target.service_account!r} is not a user-managed service account's email",
                "give the email the trigger runs as, NAME@PROJECT.iam.gserviceaccount.com (not "
                'its projects/P/serviceAccounts/ path), or "" if it runs as Cloud Build\'s default',
            )
        )
    return found


def _is_json(value: Any) -> bool:
    try:
        json.dumps(value, allow_nan=False)
    except (TypeError, ValueError):
        return False
    return True
