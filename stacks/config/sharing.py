"""Which jobs of a team run on one deployed function, and whether that sharing is safe.

Jobs that name the same source folder and entry point with the same function settings (runtime,
timeout, memory, instances, environment and labels: everything the function resource is built
from) share one gen2 function and its one runtime account. Their runs stay apart: runonce keys a
run by the Scheduler job's name (`X-CloudScheduler-JobName`, one Scheduler job per job) and its
schedule time. Jobs whose settings differ get functions of their own, so every job still gets
the timeout, and the lease derived from it (timeout + 60 s), that its retries were validated
against. A shared function is named after the first of its jobs in the team file, which keeps
the names (and Terraform addresses) of a team deployed before functions were shared.

One value is per job but set on the function: the retention of run records. A shared function
keeps records for the longest retention among its jobs (longer never breaks a run; it only keeps
records longer), and `explain` says so.

What sharing can break is concurrency: a gen2 function instance serves one request at a time
unless configured otherwise ("By default, function instances handle only one request at a time",
https://cloud.google.com/functions/docs/configuring/concurrency), and when `max_instances` are
busy "incoming requests can be queued for up to 10 seconds ... If no instances become available
during the window, the request fails with a 429 error code"
(https://cloud.google.com/run/docs/about-instance-autoscaling). Jobs that each had a function
of their own now start on one, so `stacks.validate.sharing.crowded_start` finds the minute at
which more of them start than the function has instances: those deliveries would be refused,
spending the retries a crashed run needs.

Plain data and no cdktf: the validation and the stack both use it.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, fields

from stacks import naming
from stacks.config.targets import target_json
from stacks.config.team import Job, Team

SHOWN_JOBS = 6
"""Job names listed in a message before "and N more"."""


@dataclass(frozen=True)
class FunctionSettings:
    """Everything a job's function is built from: jobs with equal settings share a function."""

    source: str
    entry_point: str
    runtime: str
    timeout_seconds: int
    memory: str
    min_instances: int
    max_instances: int
    env: tuple[tuple[str, str], ...]
    labels: tuple[tuple[str, str], ...]
    target: str
    """The Google API target the proxy starts (its RUNONCE_TARGET JSON), or "" for the team's code."""

    @classmethod
    def of(cls, job: Job) -> FunctionSettings:
        """The settings of one job's function."""
        return cls(
            source=job.code_source,
            entry_point=job.entry_point,
            runtime=job.runtime,
            timeout_seconds=job.timeout_seconds,
            memory=job.memory,
            min_instances=job.min_instances,
            max_instances=job.max_instances,
            env=tuple(sorted(job.env.items())),
            labels=tuple(sorted(job.labels.items())),
            target=target_json(job.target) if job.target is not None else "",
        )

    @property
    def code(self) -> str:
        """The code the function runs: `functions/<source>:<entry point>`."""
        return f"functions/{self.source}:{self.entry_point}"


SETTING_NAMES = tuple(f.name for f in fields(FunctionSettings) if f.name not in ("source", "entry_point"))
"""The settings besides the code, as job fields are named."""


@dataclass(frozen=True)
class SharedFunction:
    """One deployed function and the jobs it serves (one, or several with equal settings)."""

    name: str
    """The first of its jobs in the team file: names the function `<team>-<name>`, its runtime
    account `<team>-<name>-run` and its constructs, exactly as a function of that job alone."""
    settings: FunctionSettings
    """What the function is built from."""
    jobs: tuple[Job, ...]
    """The jobs whose Scheduler jobs call it, in team-file order."""

    @property
    def first(self) -> Job:
        """The job the function is named after (its settings are every job's)."""
        return self.jobs[0]

    @property
    def retention_seconds(self) -> int:
        """How long the function keeps run records: the longest retention of its jobs."""
        return max(job.retention_seconds for job in self.jobs)

    @property
    def job_names(self) -> list[str]:
        """Its jobs' names."""
        return [job.name for job in self.jobs]


def shared_functions(team: Team) -> list[SharedFunction]:
    """The team's functions, in the order of their first jobs; with `share_functions=False`
    (and during a migration's first step, `keep_per_job_accounts=True`) one per job."""
    groups: dict[object, list[Job]] = {}
    for job in team.jobs:
        share = team.share_functions and not team.keep_per_job_accounts
        key: object = FunctionSettings.of(job) if share else job.name
        groups.setdefault(key, []).append(job)
    return [
        SharedFunction(jobs[0].name, FunctionSettings.of(jobs[0]), tuple(jobs)) for jobs in groups.values()
    ]


def names(jobs: Sequence[str]) -> str:
    """Job names for a message, the first few and how many more."""
    shown = ", ".join(jobs[:SHOWN_JOBS])
    return shown if len(jobs) <= SHOWN_JOBS else f"{shown} and {len(jobs) - SHOWN_JOBS} more"


def same_code_different_settings(
    functions: Sequence[SharedFunction],
) -> Iterator[tuple[str, list[SharedFunction], list[str]]]:
    """(code, functions, differing settings) for every source and entry point that more than one
    function runs: settings that, made equal, would let their jobs share one function."""
    by_code: dict[str, list[SharedFunction]] = defaultdict(list)
    for function in functions:
        by_code[function.settings.code].append(function)
    for code, group in by_code.items():
        if len(group) > 1:
            differing = [
                name for name in SETTING_NAMES if len({getattr(f.settings, name) for f in group}) > 1
            ]
            yield code, group, differing


def explain(team: Team) -> list[str]:
    """What synth prints about the team's functions: which jobs share one, and which jobs run
    the same code on functions of their own, and why."""
    functions = shared_functions(team)
    why = (
        " (keep_per_job_accounts=True, migration step 1: one function per job)"
        if team.keep_per_job_accounts
        else ("" if team.share_functions else " (share_functions=False: one function per job)")
    )
    lines = [f"team {team.name!r}: {len(team.jobs)} job(s) on {len(functions)} function(s){why}"]
    for function in functions:
        if len(function.jobs) > 1:
            retentions = {job.retention_seconds for job in function.jobs}
            kept = (
                f"; run records kept {function.retention_seconds} s, the longest retention of its jobs"
                if len(retentions) > 1
                else ""
            )
            lines.append(
                f"  function {naming.function_name(team.name, function.name)} serves jobs "
                f"{names(function.job_names)} (same {function.settings.code} and settings){kept}"
            )
    if team.share_functions and not team.keep_per_job_accounts:
        for code, group, differing in same_code_different_settings(functions):
            lines.append(
                f"  {code} runs on {len(group)} functions ("
                + names([naming.function_name(team.name, f.name) for f in group])
                + f"): their jobs differ in {', '.join(differing)}, so each has its own function "
                "and runtime account"
            )
    return lines
