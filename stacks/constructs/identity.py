"""Service accounts: one runtime account per function, one build and one invoker account per team;
and the team's custom roles, for what no predefined role grants narrowly enough."""

from __future__ import annotations

from constructs import Construct

from stacks.config import defaults
from stacks.constructs.provider import ProjectIamCustomRole, ServiceAccount
from stacks.constructs.required_apis import RequiredApis
from stacks.toolchain import TerraformResourceLifecycle

CREATE_BEFORE_DESTROY = TerraformResourceLifecycle(create_before_destroy=True)
"""`lifecycle { create_before_destroy = true }`: set on functions and invoker grants, so that a
function or grant a Scheduler job stops using is destroyed only after that job has been
repointed (docs/stacks.md, "Migration")."""


def service_account(
    scope: Construct, id: str, project: str, account_id: str, display_name: str, apis: RequiredApis
) -> ServiceAccount:
    """A service account of the project, created once the IAM API is on."""
    return ServiceAccount(
        scope,
        id,
        project=project,
        account_id=account_id,
        display_name=display_name,
        depends_on=apis.of(defaults.API_IAM),
    )


def custom_role(
    scope: Construct,
    id: str,
    project: str,
    team: str,
    purpose: str,
    permissions: tuple[str, ...],
    title: str,
    description: str,
    apis: RequiredApis,
) -> ProjectIamCustomRole:
    """The project custom role `runonce_<team>_<purpose>` (a role id takes no dash) holding exactly
    `permissions`, created once the IAM API is on."""
    return ProjectIamCustomRole(
        scope,
        id,
        project=project,
        role_id=f"runonce_{team.replace('-', '_')}_{purpose}",
        title=title,
        description=description,
        permissions=list(permissions),
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
