"""The account one function runs as, and the one thing it may do: use the team's ledger.

One per function (jobs that share a function run the same code, so they need the same access),
never shared between functions: the runtime account is the one that holds data access. Built for
every function before any function (see `TeamStack`), so that one wait after all the grants
(`defaults.IAM_SETTLE`) precedes every function's creation. It is a plain class whose resources
live in the stack, ids prefixed with the function's name (its first job's, as before functions
were shared, so a deployed team keeps its Terraform addresses), not a construct of its own: a
construct is one more jsii round trip per function, and synth time grows with the count.
"""

from __future__ import annotations

from dataclasses import dataclass

from constructs import Construct

from stacks import naming
from stacks.config import defaults
from stacks.constructs.dedup_store import DedupStore
from stacks.constructs.identity import member, service_account
from stacks.constructs.provider import ProjectIamMember
from stacks.constructs.required_apis import RequiredApis


@dataclass(frozen=True)
class FunctionIdentityProps:
    """The function whose runtime account this is, and what it may reach."""

    project: str
    """Project id the account is created in."""
    team: str
    """Team name: prefixes the account id."""
    function: str
    """The function's name (its first job's): names the account `<team>-<function>-run`."""
    store: DedupStore
    """The team's ledger; the runtime account may use this database and nothing else."""
    apis: RequiredApis
    """The stack's enabled APIs."""
    kind: str = "function"
    """What runs as the account, in its display name: "function", or "service" for a Cloud Run
    service the stack deploys (`stacks.constructs.run_service`)."""


class FunctionIdentity:
    """A function's runtime account and its ledger grant, created in `scope` with ids starting `id`."""

    def __init__(self, scope: Construct, id: str, props: FunctionIdentityProps) -> None:
        self.runtime_account = service_account(
            scope,
            f"{id}-runtime-account",
            props.project,
            naming.account_id(props.team, props.function, naming.RUNTIME_ROLE),
            f"runonce {props.team}/{props.function} {props.kind} runtime",
            props.apis,
        )
        """The `google_service_account` the function runs as."""
        self.runtime_email: str = self.runtime_account.email  # read once: each read is a jsii round trip
        """The runtime account's email (a Terraform reference)."""
        self.ledger_grant = grant_ledger(
            scope, f"{id}-runtime-ledger", props.project, member(self.runtime_email), props.store
        )
        """roles/datastore.user on the ledger database only (IAM condition)."""


def grant_ledger(
    scope: Construct, id: str, project: str, principal: str, store: DedupStore
) -> ProjectIamMember:
    """roles/datastore.user for `principal` (an IAM member) on the ledger database only: a project
    grant with the IAM condition that names the one database (`DedupStore.only_this`)."""
    return ProjectIamMember(
        scope,
        id,
        project=project,
        role=defaults.ROLE_LEDGER,
        member=principal,
        condition=store.only_this("runonce-ledger-only"),
    )
