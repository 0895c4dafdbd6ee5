"""The watchdog's rules: its account reads the team's ledger and writes only a database of its own,
unless it catches up missed runs, and then it holds exactly what a catch-up needs as well.

A watchdog is the function whose environment names the team's ledger for reading
(`RUNONCE_WATCHDOG_LEDGER_DATABASE`); its own store is its `RUNONCE_DATABASE`; it catches up when
a job of its `RUNONCE_WATCHDOG_JOBS` has a `catch_up_seconds` above 0. Firestore's IAM is granted
per database (an IAM condition on the database's resource name), so "reads the ledger only" holds
exactly when the two databases differ and every grant of the watchdog's account is
`roles/datastore.viewer` on the ledger's database or `roles/datastore.user` on its own. A
catch-up writes a request in the ledger and runs the job through Scheduler, as `runonce rerun`
does: `roles/datastore.user` on the ledger's database and `roles/cloudscheduler.jobRunner` on the
project (Scheduler's IAM has no narrower level), both only for a watchdog that catches up. A
watchdog that pauses a job that keeps failing (a job with `pause_after_failures` above 0) holds,
only then, a project custom role of the stack with exactly `cloudscheduler.jobs.get` and
`cloudscheduler.jobs.pause` (no predefined role but roles/cloudscheduler.admin holds
`jobs.pause`).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

from policy import grants
from policy.rules.store import is_connection_grant
from policy.synthesized import MEMBER_ACCOUNT, Resource, Stack
from policy.verdict import Verdict
from stacks.contract import (
    DATABASE_VARIABLE,
    STORE_VARIABLE,
    WATCHDOG_JOBS_VARIABLE,
    WATCHDOG_LEDGER_DATABASE_VARIABLE,
)

CUSTOM_ROLE = re.compile(r"^\$\{google_project_iam_custom_role\.([^.}]+)\.name\}$")
"""A grant's role that names a custom role of the stack by its `name` (projects/P/roles/ID)."""
PAUSER_PERMISSIONS = frozenset({"cloudscheduler.jobs.get", "cloudscheduler.jobs.pause"})
"""What pausing a job needs: read its state, and pause it."""
PAUSER = "pauser"
"""The role `_allowed` gives a grant of a custom role holding exactly `PAUSER_PERMISSIONS`."""
ONE_DATABASE = re.compile(r'^resource\.name\s*==\s*"projects/[^/"]+/databases/([^/"]+)"$')


@dataclass(frozen=True)
class Watchdog:
    """One watchdog function of a stack, as its configuration names its databases."""

    address: str
    account: str
    """The name of the `google_service_account` it runs as ("" if it names none of the stack's)."""
    own_database: str
    ledger_database: str
    catches_up: bool = False
    """Whether a job it watches has a catch-up window."""
    pauses: bool = False
    """Whether a job it watches has `pause_after_failures`."""
    on_valkey: bool = False
    """Whether its RUNONCE_STORE names a Valkey server: its records (its pauses among them) are
    there, not in `own_database`."""


def catches_up(jobs: object) -> bool:
    """Whether a watchdog's jobs JSON (as synthesized) gives any job a catch-up window; a value
    that is not such a list gives none."""
    return _any_positive(jobs, "catch_up_seconds")


def pauses(jobs: object) -> bool:
    """Whether a watchdog's jobs JSON gives any job `pause_after_failures` above 0."""
    return _any_positive(jobs, "pause_after_failures")


def _any_positive(jobs: object, field: str) -> bool:
    try:
        listed = json.loads(str(jobs))
    except ValueError:
        return False
    return isinstance(listed, list) and any(
        isinstance(job, dict)
        and isinstance(job.get(field), int)
        and not isinstance(job[field], bool)
        and job[field] > 0
        for job in listed
    )


def watchdogs(stack: Stack) -> list[Watchdog]:
    """Every watchdog function of the stack."""
    found = []
    for name, config in stack.configs("google_cloudfunctions2_function").items():
        service = config.get("service_config") or {}
        if isinstance(service, list):
            service = service[0] if service else {}
        env = service.get("environment_variables") or {}
        if WATCHDOG_LEDGER_DATABASE_VARIABLE not in env:
            continue
        account = MEMBER_ACCOUNT.search(str(service.get("service_account_email", "")))
        found.append(
            Watchdog(
                f"google_cloudfunctions2_function.{name}",
                account.group(1) if account else "",
                str(env.get(DATABASE_VARIABLE, "")),
                str(env[WATCHDOG_LEDGER_DATABASE_VARIABLE]),
                catches_up(env.get(WATCHDOG_JOBS_VARIABLE, "[]")),
                pauses(env.get(WATCHDOG_JOBS_VARIABLE, "[]")),
                STORE_VARIABLE in env,
            )
        )
    return found


PROJECT = "project"
"""What `_scope` gives a project-level grant without a condition."""


def _database(grant: Resource) -> str | None:
    """The one database a project-level grant's condition names, or None."""
    if grant.type != "google_project_iam_member":
        return None
    found = ONE_DATABASE.match(str(grant.config.get("condition", {}).get("expression", "")).strip())
    return found.group(1) if found else None


def _scope(grant: Resource) -> str | None:
    """The one database a project-level grant is conditioned on, `PROJECT` for a project-level
    grant without a condition, or None for anything else."""
    if grant.type == "google_project_iam_member" and not grant.config.get("condition"):
        return PROJECT
    return _database(grant)


def _allowed(dog: Watchdog) -> set[tuple[str, str]]:
    """The (role, scope) grants its account may hold."""
    allowed = {(grants.LEDGER_READER_ROLE, dog.ledger_database)}
    if dog.own_database != dog.ledger_database:
        allowed.add((grants.LEDGER_ROLE, dog.own_database))
    if dog.catches_up:
        allowed |= _catch_up(dog)
    if dog.pauses:
        allowed.add((PAUSER, PROJECT))
    return allowed


def custom_permissions(grant: Resource, stack: Stack) -> frozenset[str] | None:
    """The permissions of the stack's custom role a grant grants (by its `name`), or None for a
    grant of any other role."""
    found = CUSTOM_ROLE.match(str(grant.role))
    if found is None:
        return None
    held = (stack.configs("google_project_iam_custom_role").get(found.group(1)) or {}).get("permissions")
    return frozenset(map(str, held)) if isinstance(held, list) else frozenset()


def _role(grant: Resource, stack: Stack) -> str:
    """The grant's role, `PAUSER` for a custom role of the stack holding exactly what pausing a job
    needs."""
    return PAUSER if custom_permissions(grant, stack) == PAUSER_PERMISSIONS else str(grant.role)


def _catch_up(dog: Watchdog) -> set[tuple[str, str]]:
    """The (role, scope) grants a catch-up needs."""
    return {(grants.LEDGER_ROLE, dog.ledger_database), (grants.JOB_RUNNER_ROLE, PROJECT)}


def _mine(resource: Resource, stack: Stack) -> list[Watchdog]:
    return [dog for dog in watchdogs(stack) if dog.account and dog.account in resource.member_accounts]


def is_catch_up_runner(resource: Resource, stack: Stack) -> bool:
    """The job runner on the project for the account of a watchdog that catches up."""
    dogs = _mine(resource, stack)
    return (
        bool(dogs)
        and len(resource.member_accounts) == len(resource.members)
        and all(dog.catches_up for dog in dogs)
        and (resource.role, _scope(resource)) == (grants.JOB_RUNNER_ROLE, PROJECT)
    )


def is_pauser(resource: Resource, stack: Stack) -> bool:
    """The pauser custom role on the project for the account of a watchdog that pauses jobs
    (Scheduler's IAM has no level below the project)."""
    dogs = _mine(resource, stack)
    return (
        bool(dogs)
        and len(resource.member_accounts) == len(resource.members)
        and all(dog.pauses for dog in dogs)
        and (_role(resource, stack), _scope(resource)) == (PAUSER, PROJECT)
    )


def watchdog_holds_only_what_it_needs(resource: Resource, stack: Stack) -> Verdict:
    """Every grant to a watchdog's account is datastore.viewer on the ledger's database or
    datastore.user on its own database, or the connection role on the team's Valkey instance (which
    IAM cannot make read-only); and, only for a watchdog that catches up, datastore.user on the
    ledger's database and the job runner on the project, with no condition; and, only for a watchdog
    that pauses jobs, the pauser custom role on the project."""
    if not resource.is_iam:
        return Verdict.NOT_APPLICABLE
    mine = _mine(resource, stack)
    if not mine:
        return Verdict.NOT_APPLICABLE
    if is_connection_grant(resource, stack):
        return Verdict.COMPLIANT
    held = (_role(resource, stack), _scope(resource))
    return Verdict.COMPLIANT if all(held in _allowed(dog) for dog in mine) else Verdict.NON_COMPLIANT


def watchdog_can_catch_up(resource: Resource, stack: Stack) -> Verdict:
    """A watchdog that catches up holds both grants a catch-up needs (without either, every
    catch-up fails: its request cannot be written, or Scheduler refuses the run)."""
    dog = next((dog for dog in watchdogs(stack) if dog.address == resource.address), None)
    if dog is None or not dog.catches_up:
        return Verdict.NOT_APPLICABLE
    held = {
        (grant.role, _scope(grant))
        for grant in stack.resources()
        if grant.is_iam and dog.account and dog.account in grant.member_accounts
    }
    return Verdict.COMPLIANT if _catch_up(dog) <= held else Verdict.NON_COMPLIANT


def watchdog_has_its_own_store_and_reads_the_ledger(resource: Resource, stack: Stack) -> Verdict:
    """A watchdog writes a database that is not the ledger, and its account holds the read grant
    on the ledger (without it every tick is refused)."""
    dog = next((dog for dog in watchdogs(stack) if dog.address == resource.address), None)
    if dog is None:
        return Verdict.NOT_APPLICABLE
    if not dog.account or not dog.own_database or dog.own_database == dog.ledger_database:
        return Verdict.NON_COMPLIANT
    reads = any(
        grant.role == grants.LEDGER_READER_ROLE
        and dog.account in grant.member_accounts
        and _database(grant) == dog.ledger_database
        for grant in stack.resources()
        if grant.is_iam
    )
    return Verdict.COMPLIANT if reads else Verdict.NON_COMPLIANT


def watchdog_can_pause(resource: Resource, stack: Stack) -> Verdict:
    """A watchdog that may pause a job (`pause_after_failures`) holds a custom role with exactly
    `cloudscheduler.jobs.get` and `cloudscheduler.jobs.pause` on the project (without it every
    pause is refused, and the job keeps failing and paging)."""
    dog = next((dog for dog in watchdogs(stack) if dog.address == resource.address), None)
    if dog is None or not dog.pauses:
        return Verdict.NOT_APPLICABLE
    held = {
        (_role(grant, stack), _scope(grant))
        for grant in stack.resources()
        if grant.is_iam and dog.account and dog.account in grant.member_accounts
    }
    return Verdict.COMPLIANT if (PAUSER, PROJECT) in held else Verdict.NON_COMPLIANT
