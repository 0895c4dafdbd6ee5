"""Service accounts: every component of a job (runtime, build, Scheduler) gets its own."""

from __future__ import annotations

from constructs import Construct

from stacks import defaults, naming
from stacks.provider import ServiceAccount
from stacks.required_apis import RequiredApis
from stacks.team import Job, Team


def job_service_account(
    scope: Construct, id: str, team: Team, job: Job, role: str, purpose: str, apis: RequiredApis
) -> ServiceAccount:
    """A service account used by one component of one job; `role` is a short suffix of its id
    ("run", "build", "call") and `purpose` is shown as its display name."""
    return ServiceAccount(
        scope,
        id,
        project=team.project,
        account_id=naming.account_id(team.name, job.name, role),
        display_name=f"runonce {team.name}/{job.name} {purpose}",
        depends_on=apis.of(defaults.API_IAM),
    )


def member(email: str) -> str:
    """The IAM principal of a service account, from its email (a token or a literal).

    Built here instead of reading the resource's `member` attribute: every attribute read is a
    jsii round trip, and the email is read anyway for the component's identity."""
    return f"serviceAccount:{email}"


def resource_id(project: str, email: str) -> str:
    """The `projects/P/serviceAccounts/EMAIL` id that build configs take."""
    return f"projects/{project}/serviceAccounts/{email}"
