"""The service agents a team stack grants roles to, provisioned before anything uses them.

Google creates a service agent "at some point after you activate and use the API", and "if a
service agent hasn't been created yet, then you can't grant roles to the service agent" (IAM,
"Create and grant roles to service agents"). A grant to an agent's email built from the project
number can therefore be refused on a fresh project. So the stack asks for each agent it grants a
role to (`google_project_service_identity`, the provider's way to trigger that creation), grants
it the role Google would have granted on creation ("service agents that are created at a user's
request aren't automatically granted roles", same page; the role per agent: IAM, "Service
agents"), and every grant to the agent names the identity's `member`, so it follows the identity.

- **Eventarc**: a gen2 function with an `event_trigger` is refused with "Permission denied while
  using the Eventarc Service Agent ... verify that it has Eventarc Service Agent role" (google
  provider issues 14584 and 25294, terraform-docs-samples issue 486); its functions wait for the
  agent's role (docs/stacks/constructs.md).
- **Pub/Sub**: it forwards dead letters (publisher on the dead-letter topic, subscriber on the
  push subscription) and signs push and Eventarc deliveries' OIDC tokens (token creator on the
  signing account): the grants `stacks.constructs.event_job` makes for it.

`google_project_service_identity` exists only in the google-beta provider at 6.50, and the prebuilt
bindings are GA only. Its schema is two strings (`project`, `service`) and two computed ones
(`email`, `member`), so it is written as a raw `TerraformResource` with the beta provider declared
through overrides, not through the 31 MB google-beta bindings that a synth would have to load.
"""

from __future__ import annotations

from constructs import Construct

from stacks.config import defaults
from stacks.constructs.provider import ProjectIamMember
from stacks.constructs.required_apis import RequiredApis
from stacks.toolchain import TerraformResource, TerraformStack

BETA_PROVIDER = "google-beta"
BETA_SOURCE = "hashicorp/google-beta"
# The beta provider of the same release as the prebuilt GA bindings (FACTS: google 6.50.0).
BETA_VERSION = "6.50.0"
ROLE_EVENTARC_AGENT = "roles/eventarc.serviceAgent"
ROLE_PUBSUB_AGENT = "roles/pubsub.serviceAgent"
AGENT_ROLES = {defaults.API_EVENTARC: ROLE_EVENTARC_AGENT, defaults.API_PUBSUB: ROLE_PUBSUB_AGENT}
"""The role Google grants each agent on the project when it creates the agent by itself (IAM,
"Service agents": "When the service agent is created, Google grants this role automatically")."""


def declare_beta_provider(stack: TerraformStack, project: str, region: str) -> None:
    """`google-beta` in required_providers and its provider block, for the team's project."""
    stack.add_override(
        f"terraform.required_providers.{BETA_PROVIDER}", {"source": BETA_SOURCE, "version": BETA_VERSION}
    )
    stack.add_override(f"provider.{BETA_PROVIDER}", [{"project": project, "region": region}])


def service_agent(
    scope: Construct, id: str, project: str, api: str, apis: RequiredApis
) -> tuple[TerraformResource, ProjectIamMember]:
    """The service agent of `api` (created once the API is on) and its role (`AGENT_ROLES`) at
    project level, the only level an agent role is granted at. The identity resource is a no-op
    on destroy (provider docs); the role binding is removed with the stack."""
    agent = TerraformResource(
        scope,
        id,
        terraform_resource_type="google_project_service_identity",
        depends_on=apis.of(api),
    )
    agent.add_override("provider", BETA_PROVIDER)
    agent.add_override("project", project)
    agent.add_override("service", api)
    role = ProjectIamMember(
        scope,
        f"{id}-role",
        project=project,
        role=AGENT_ROLES[api],
        member=agent.get_string_attribute("member"),
    )
    return agent, role


def eventarc_agent(
    scope: Construct, project: str, apis: RequiredApis
) -> tuple[TerraformResource, ProjectIamMember]:
    """The Eventarc service agent and its role.

    The role: Eventarc's roles page says it "is granted by default when you first create an
    Eventarc resource, but if the role is removed, you must restore it" (its zh-CN form), and the
    refusal above asks to "verify that it has Eventarc Service Agent role"; a function's trigger
    is that first Eventarc resource, so the default grant races it."""
    return service_agent(scope, "eventarc-agent", project, defaults.API_EVENTARC, apis)


def pubsub_agent(
    scope: Construct, project: str, apis: RequiredApis
) -> tuple[TerraformResource, ProjectIamMember]:
    """The Pub/Sub service agent (`service-PROJECT_NUMBER@gcp-sa-pubsub.iam.gserviceaccount.com`)
    and roles/pubsub.serviceAgent ("Cloud Pub/Sub Service Agent": "Grants Cloud Pub/Sub Service
    Account access to manage resources", IAM, "Pub/Sub roles and permissions"), which an agent
    created on request lacks. One per team with event jobs."""
    return service_agent(scope, "pubsub-agent", project, defaults.API_PUBSUB, apis)
