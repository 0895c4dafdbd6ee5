"""Google Cloud's default quotas that bind a runonce deployment, and what the teams would use.

`QUOTAS` is the one table: each quota with its default, where it applies (the project, or the
project and region), and the page and words it comes from (read 2026-12). Synth counts what every
team stack would create, adds up the teams that deploy into the same project (and region), and
fails with a `Problem` when a total is above the limit, so nobody meets the quota part-way
through an apply. A team whose project has a raised (or, to leave room for other workloads, a
lower) quota declares it in `Team.quotas`; teams of one project that declare different values
are held to the lowest.

What synth cannot see is what else the project holds: service accounts made by hand or by other
tools count against the same 100. Declare the room that is left (`quotas={"service_accounts":
100 - <accounts already there>}`) when the project is not runonce's alone.

Quotas that do not bind here: the stacks create no log-based metrics, one Firestore database
(two with the watchdog: the ledger and the watchdog's own), one bucket and one Artifact Registry
repository per team.
"""

from __future__ import annotations

import difflib
from collections import defaultdict
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from stacks.config.problem import Problem
from stacks.config.sharing import same_code_different_settings, shared_functions
from stacks.config.team import EVENTARC, Team

TEAM_ACCOUNTS = 2
"""Service accounts every team has besides one runtime account per function: the build account
and the Scheduler invoker account (`stacks/constructs/team_identity.py`)."""


@dataclass(frozen=True)
class Quota:
    """One quota the stacks count against."""

    key: str
    """Its name in `Team.quotas`."""
    what: str
    """What is counted, as messages say it."""
    per_region: bool
    """Counted per project and region (True) or per project (False)."""
    default: int
    """Google's default."""
    source: str
    """The page the default comes from."""
    says: str
    """What that page says, quoted."""
    beyond: str
    """How to go beyond it."""


SERVICE_ACCOUNTS = Quota(
    key="service_accounts",
    what="service accounts",
    per_region=False,
    default=100,
    source="https://cloud.google.com/iam/docs/service-accounts-create",
    says="By default, each project can have up to 100 service accounts",
    beyond="a quota: request an increase, then declare it in quotas",
)
CLOUD_RUN_SERVICES = Quota(
    key="cloud_run_services",
    what="Cloud Run services (each gen2 function is one)",
    per_region=True,
    default=1000,
    source="https://cloud.google.com/run/quotas (and https://cloud.google.com/functions/quotas)",
    says=(
        "Service | Maximum number of services | 1000 | per project and region; for functions: "
        '"Number of functions: 1,000 minus the number of Cloud Run services deployed", per region, '
        "cannot be increased"
    ),
    beyond="use another region or project (the functions page says it cannot be increased)",
)
SCHEDULER_JOBS = Quota(
    key="scheduler_jobs",
    what="Cloud Scheduler jobs",
    per_region=True,
    default=1000,
    source="https://cloud.google.com/scheduler/quotas",
    says="Number of jobs (per region) | Default: 1000 Max: 5000",
    beyond="a quota: request an increase (up to 5000), then declare it in quotas",
)
QUOTAS: tuple[Quota, ...] = (SERVICE_ACCOUNTS, CLOUD_RUN_SERVICES, SCHEDULER_JOBS)
"""Every quota synth counts against, by the order messages list them."""
QUOTA_KEYS = {quota.key: quota for quota in QUOTAS}


def usage(team: Team) -> dict[str, int]:
    """What one team's stack creates, by quota key."""
    functions = len(shared_functions(team)) + len(team.event_jobs)  # an event job's function is its own
    triggers = sum(1 for job in team.event_jobs if job.trigger == EVENTARC)  # each has its own account
    retiring = 2 * len(team.jobs) if team.keep_per_job_accounts else 0  # migration step 1
    # The build account and, unless nothing signs as it, the invoker; a runtime account per function.
    team_accounts = TEAM_ACCOUNTS if team.needs_invoker else TEAM_ACCOUNTS - 1
    watchdog = 1 if team.watched else 0  # its account, its function and its Scheduler job
    deployed = sum(1 for service in team.services if service.deployed)  # a service and its account each
    scheduled = len(team.jobs) + len(team.service_jobs) + len(team.app_engine_jobs)
    return {
        SERVICE_ACCOUNTS.key: team_accounts + functions + triggers + retiring + watchdog + deployed,
        CLOUD_RUN_SERVICES.key: functions + watchdog + deployed,
        SCHEDULER_JOBS.key: scheduled + watchdog,
    }


def declared_problems(team: Team) -> Iterator[Problem]:
    """`Team.quotas` names known quotas, with positive limits."""
    for key, value in team.quotas.items():
        if key not in QUOTA_KEYS:
            close = difflib.get_close_matches(key, QUOTA_KEYS, n=1)
            yield Problem(
                team.name,
                None,
                "quotas",
                f"{key!r} is not a quota synth counts",
                f'write "{close[0]}"' if close else f"use one of {', '.join(QUOTA_KEYS)}",
            )
        elif value < 1:
            yield Problem(
                team.name, None, "quotas", f"{key}={value} is not a quota", "give a positive number"
            )


def quota_problems(teams: Sequence[Team], files: Sequence[str]) -> Iterator[Problem]:
    """Every quota that the teams deploying into one project (and region) would exceed together;
    each is reported once, on the last of those teams in file order."""
    users: dict[tuple[Quota, str, str], list[tuple[int, int]]] = defaultdict(list)
    for index, team in enumerate(teams):
        counts = usage(team)
        for quota in QUOTAS:
            region = team.region if quota.per_region else ""
            users[(quota, team.project, region)].append((index, counts[quota.key]))
    for (quota, project, region), used in users.items():
        total = sum(count for _, count in used)
        declared = [teams[i].quotas[quota.key] for i, _ in used if teams[i].quotas.get(quota.key, 0) >= 1]
        limit = min(declared) if declared else quota.default
        if total <= limit:
            continue
        last = teams[used[-1][0]]
        where = f"project {project!r}" + (f" in {region}" if region else "")
        each = ", ".join(f"team {teams[i].name!r} {count}" for i, count in used) if len(used) > 1 else ""
        whose = "declared in quotas" if declared else f"Google's default: {quota.says!r}, {quota.source}"
        yield Problem(
            last.name,
            None,
            "quotas",
            f"the stacks for {where} would create {total} {quota.what}"
            + (f" ({each})" if each else "")
            + f", above the quota of {limit} ({whose}): the apply would stop with a quota error "
            f"part-way through, at the {limit + 1}th",
            _fix(quota, [teams[i] for i, _ in used], total),
            files[used[-1][0]],
        )


def _fix(quota: Quota, teams: Sequence[Team], total: int) -> str:
    """How to fit: fewer functions (for accounts and services), another project, or a raise."""
    levers = []
    if quota is not SCHEDULER_JOBS:
        unshared = [team.name for team in teams if not team.share_functions]
        if unshared:
            levers.append(f"set share_functions=True in team {', '.join(map(repr, unshared))}")
        for team in teams:
            for code, group, differing in same_code_different_settings(shared_functions(team)):
                if "target" in differing:  # one proxy per target, on purpose (docs/targets.md)
                    continue
                levers.append(
                    f"team {team.name!r} runs {code} on {len(group)} functions that differ only in "
                    f"{', '.join(differing)}: with equal settings their jobs share one"
                )
    levers.append("deploy a team to another project" + (" or region" if quota.per_region else ""))
    levers.append(f"{quota.beyond} (quotas={{{quota.key!r}: {total}}} or more)")
    return "; ".join(levers[:3] + levers[-1:]) if len(levers) > 4 else "; ".join(levers)
