"""The watchdog's rules: its account reads the team's ledger and writes only a database of its own.

A watchdog is the function whose environment names the team's ledger for reading
(`RUNONCE_WATCHDOG_LEDGER_DATABASE`); its own store is its `RUNONCE_DATABASE`. Firestore's IAM is
granted per database (an IAM condition on the database's resource name), so "reads the ledger
only" holds exactly when the two databases differ and every grant of the watchdog's account is
`roles/datastore.viewer` on the ledger's database or `roles/datastore.user` on its own.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from policy import grants
from policy.synthesized import MEMBER_ACCOUNT, Resource, Stack
from policy.verdict import Verdict
from stacks.contract import DATABASE_VARIABLE, WATCHDOG_LEDGER_DATABASE_VARIABLE

ONE_DATABASE = re.compile(r'^resource\.name\s*==\s*"projects/[^/"]+/databases/([^/"]+)"$')


@dataclass(frozen=True)
class Watchdog:
    """One watchdog function of a stack, as its configuration names its databases."""

    address: str
    account: str
    """The name of the `google_service_account` it runs as ("" if it names none of the stack's)."""
    own_database: str
    ledger_database: str


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
            )
        )
    return found


def _database(grant: Resource) -> str | None:
    """The one database a project-level grant's condition names, or None."""
    if grant.type != "google_project_iam_member":
        return None
    found = ONE_DATABASE.match(str(grant.config.get("condition", {}).get("expression", "")).strip())
    return found.group(1) if found else None


def watchdog_reads_the_ledger_only(resource: Resource, stack: Stack) -> Verdict:
    """Every grant to a watchdog's account is datastore.viewer on the ledger's database or
    datastore.user on its own database, and never anything on the ledger that writes."""
    if not resource.is_iam:
        return Verdict.NOT_APPLICABLE
    mine = [dog for dog in watchdogs(stack) if dog.account and dog.account in resource.member_accounts]
    if not mine:
        return Verdict.NOT_APPLICABLE
    database = _database(resource)
    for dog in mine:
        allowed = {(grants.LEDGER_READER_ROLE, dog.ledger_database)}
        if dog.own_database != dog.ledger_database:
            allowed.add((grants.LEDGER_ROLE, dog.own_database))
        if (resource.role, database) not in allowed:
            return Verdict.NON_COMPLIANT
    return Verdict.COMPLIANT


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
