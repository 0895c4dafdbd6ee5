"""A team's own fields: its name, project, region and Firestore location, database and
collection ids, the template's placeholders, its jobs and labels, and its declared quotas."""

from __future__ import annotations

import difflib
import re
from collections import Counter
from collections.abc import Callable, Iterable, Iterator

from stacks import locations, naming
from stacks.config.problem import Problem, ProblemAt
from stacks.config.team import Team
from stacks.validate.functions import job_labels
from stacks.validate.quotas import declared_problems
from stacks.validate.services import app_engine_location

PROJECT_ID = re.compile(r"^[a-z][a-z0-9-]{4,28}[a-z0-9]$")
DATABASE_ID = re.compile(r"^[a-z][a-z0-9-]{2,61}[a-z0-9]$")
COLLECTION_ID = re.compile(r"^[A-Za-z0-9_-]{1,100}$")
TEMPLATE_PLACEHOLDERS = {"name": "my-team", "project": "my-gcp-project"}
"""Values teams/_template.py ships with; a copy that still has them was not edited."""


def team_fields(team: Team) -> Iterator[Problem]:
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
    yield from region(team, problem)
    yield from app_engine_location(team, problem)
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
    if not (team.jobs or team.event_jobs or team.service_jobs or team.app_engine_jobs):
        yield problem(
            "jobs",
            "the team has no jobs",
            "add at least one Job(...), EventJob(...), ServiceJob(...) or AppEngineJob(...) or "
            "delete the team file",
        )
    names = [
        job.name
        for jobs in (team.jobs, team.event_jobs, team.service_jobs, team.app_engine_jobs)
        for job in jobs
    ]
    for name, count in Counter(names).items():
        if count > 1:
            yield Problem(
                team.name,
                name,
                "name",
                f"{count} jobs share this name (every kind of job together; it names the "
                "function or Scheduler job, and accounts)",
                "give every job of a team its own name",
            )
    function_names = {job.name for job in team.jobs} | {job.name for job in team.event_jobs}
    for name, count in Counter(service.name for service in team.services).items():
        if count > 1 or name in function_names:
            yield problem(
                "services",
                f"service {name!r} is named twice, or like a function job (both name a runtime "
                f"account {team.name}-{name}-run)",
                "give every service a name of its own, different from the team's function jobs",
            )
    yield from job_labels(team.name, None, team.labels, set())
    yield from declared_problems(team)
    yield from _acknowledgements(team, problem)


def region(team: Team, problem: ProblemAt) -> Iterator[Problem]:
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
            f"use one of {closest(team.region, locations.TEAM_REGIONS)}; if Google lists it now "
            f"({locations.LOCATIONS_PAGES}), add it to stacks/locations.py",
        )
    field = "database_location" if team.database_location else "region"
    if team.location not in locations.FIRESTORE_LOCATIONS and (
        team.database_location or team.region in locations.TEAM_REGIONS
    ):
        yield problem(
            field,
            f"{team.location!r} is not a Firestore location",
            f"set database_location to one of {closest(team.location, locations.FIRESTORE_LOCATIONS)} "
            "(multi-regions: eur3, nam5, nam7)",
        )


def closest(value: str, known: Iterable[str]) -> str:
    close = difflib.get_close_matches(value, sorted(known), n=3, cutoff=0.6)
    return ", ".join(repr(name) for name in close) if close else "the regions in stacks/locations.py"


# A Terraform resource address as the policy report prints it: `type.name`.
RESOURCE_ADDRESS = re.compile(r"^[a-z][a-z0-9_]*\.[A-Za-z0-9_-]+$")


def _acknowledgements(team: Team, problem: Callable[[str, str, str], Problem]) -> Iterator[Problem]:
    """Every acknowledgement names a rule of the policy pack (and, after its separator, one
    resource address) and gives the reason the report shows."""
    if not team.acknowledge:
        return
    # Loaded only for a team that acknowledges something: the pack's rules cost every synth ~20 ms.
    from policy.acknowledgements import SEPARATOR, parse
    from policy.pack import RULE_IDS

    for key, reason in team.acknowledge.items():
        rule_id, address = parse(key)
        if rule_id not in RULE_IDS:
            close = difflib.get_close_matches(rule_id, RULE_IDS, n=1)
            yield problem(
                "acknowledge",
                f"{key!r} acknowledges {rule_id!r}, which is not a rule of the policy pack",
                f"write {close[0] + key[len(rule_id) :]!r}"
                if close
                else f"use one of {', '.join(RULE_IDS)} (policy/pack.py)",
            )
        if SEPARATOR in key and not RESOURCE_ADDRESS.match(address):
            yield problem(
                "acknowledge",
                f"{key!r} names no resource address after {SEPARATOR!r}",
                f'write "{rule_id}{SEPARATOR}TYPE.NAME" with the address `make policy` prints in '
                f'parentheses, or "{rule_id}" alone for every resource of the stack',
            )
        if not isinstance(reason, str) or not reason.strip():
            yield problem(
                "acknowledge",
                f"acknowledging {key!r} needs a reason",
                f'write acknowledge={{"{key}": "why the team accepts this finding"}}: the report shows it',
            )
