"""The team's two shared accounts: the one its functions are built as, and the one its Scheduler
jobs sign their OIDC tokens as.

Why one of each per team is the same blast radius as one per job (docs/stacks.md, "Service
accounts and least privilege"): every grant of the build account is on a team-wide resource (the
team's source bucket, the team's image repository, the region's gcf-v2-sources bucket, log
writing), so a per-job build account could already read every job's source and push every job's
image. The invoker holds `roles/run.invoker` on the team's own Cloud Run services, one grant per
function (`ScheduledJob.grant_invoker`), never on the project: it may call the team's functions
and nothing else, and only the team's deployers (who can act as it) and Cloud Scheduler use it.

A plain class whose resources live in the stack, like `FunctionIdentity`: no construct of its own.
"""

from __future__ import annotations

from dataclasses import dataclass

from constructs import Construct

from stacks import naming
from stacks.constructs.build_grants import grant_build_access
from stacks.constructs.build_storage import BuildStorage
from stacks.constructs.identity import member, service_account
from stacks.constructs.provider import ServiceAccount
from stacks.constructs.required_apis import RequiredApis


@dataclass(frozen=True)
class TeamIdentityProps:
    """The team's project and name, and what its build account may reach."""

    project: str
    """Project id the accounts are created in."""
    team: str
    """Team name: names the accounts (`<team>-build`, `<team>-call`)."""
    needs_invoker: bool
    """Whether anything signs as the invoker (`Team.needs_invoker`); False makes no invoker."""
    build: BuildStorage
    """The team's source bucket and image repository."""
    apis: RequiredApis
    """The stack's enabled APIs."""
    gcf_sources_bucket: str
    """Google's `gcf-v2-sources-<project number>-<region>` bucket, where a gen2 build fetches
    the source from (provider issue 20571)."""


class TeamIdentity:
    """The build account with its four grants, and the Scheduler invoker account (its grants are
    per function, on each function's service)."""

    def __init__(self, scope: Construct, props: TeamIdentityProps) -> None:
        self.build_account = service_account(
            scope,
            "team-build-account",
            props.project,
            naming.team_account_id(props.team, "build"),
            f"runonce {props.team} function builds",
            props.apis,
        )
        """The `google_service_account` Cloud Build runs every function build of the team as."""
        self.build_email: str = self.build_account.email  # read once: each read is a jsii round trip
        """The build account's email (a Terraform reference)."""
        self.build_grants = grant_build_access(
            scope,
            "team-build",
            member(self.build_email),
            props.project,
            props.build,
            props.apis,
            props.gcf_sources_bucket,
        )
        """What the builds need: read the sources (both buckets), push the images, write their logs."""
        self.invoker_account: ServiceAccount | None = None
        """The `google_service_account` whose OIDC token every Scheduler job and push subscription
        of the team sends; None for a team whose only jobs are Eventarc jobs (each trigger signs
        as its own account), so no account sits unused."""
        self.invoker_email = ""
        """The invoker account's email (a Terraform reference), "" without one."""
        if props.needs_invoker:
            self.invoker_account = service_account(
                scope,
                "team-invoker-account",
                props.project,
                naming.team_account_id(props.team, "call"),
                f"runonce {props.team} Scheduler invoker",
                props.apis,
            )
            self.invoker_email = self.invoker_account.email
