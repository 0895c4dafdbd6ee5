"""The Eventarc service agent, provisioned before any function with an Eventarc trigger.

On a fresh project a gen2 function with an `event_trigger` is refused with "Permission denied while
using the Eventarc Service Agent. If you recently started to use Eventarc, it may take a few
minutes before all necessary permissions are propagated to the Service Agent. Otherwise, verify
that it has Eventarc Service Agent role" (google provider issues 14584 and 25294,
terraform-docs-samples issue 486). So a stack with an Eventarc job creates the agent
(`google_project_service_identity`), grants it `roles/eventarc.serviceAgent`, and its triggered
functions wait for both (docs/stacks.md, "The Eventarc option").

`google_project_service_identity` exists only in the google-beta provider at 6.50, and the prebuilt
bindings are GA only. Its schema is two strings (`project`, `service`) and two computed ones
(`email`, `member`), so it is written as a raw `TerraformResource` with the beta provider declared
through overrides, not through the 31 MB google-beta bindings that a synth would have to load.
"""

from __future__ import annotations

from cdktf import TerraformResource, TerraformStack
from constructs import Construct

from stacks.config import defaults
from stacks.constructs.provider import ProjectIamMember
from stacks.constructs.required_apis import RequiredApis

BETA_PROVIDER = "google-beta"
BETA_SOURCE = "hashicorp/google-beta"
# The beta provider of the same release as the prebuilt GA bindings (FACTS: google 6.50.0).
BETA_VERSION = "6.50.0"
ROLE_EVENTARC_AGENT = "roles/eventarc.serviceAgent"


def declare_beta_provider(stack: TerraformStack, project: str, region: str) -> None:
    """`google-beta` in required_providers and its provider block, for the team's project."""
    stack.add_override(
        f"terraform.required_providers.{BETA_PROVIDER}", {"source": BETA_SOURCE, "version": BETA_VERSION}
    )
    stack.add_override(f"provider.{BETA_PROVIDER}", [{"project": project, "region": region}])


def eventarc_agent(
    scope: Construct, project: str, apis: RequiredApis
) -> tuple[TerraformResource, ProjectIamMember]:
    """The Eventarc service agent (created once Eventarc is on) and its role at project level.

    The role: Eventarc's roles page says it "is granted by default when you first create an
    Eventarc resource, but if the role is removed, you must restore it" (its zh-CN form), and the
    refusal above asks to "verify that it has Eventarc Service Agent role"; a function's trigger
    is that first Eventarc resource, so the default grant races it. The identity resource is a
    no-op on destroy (provider docs)."""
    agent = TerraformResource(
        scope,
        "eventarc-agent",
        terraform_resource_type="google_project_service_identity",
        depends_on=apis.of(defaults.API_EVENTARC),
    )
    agent.add_override("provider", BETA_PROVIDER)
    agent.add_override("project", project)
    agent.add_override("service", defaults.API_EVENTARC)
    role = ProjectIamMember(
        scope,
        "eventarc-agent-role",
        project=project,
        role=ROLE_EVENTARC_AGENT,
        member=agent.get_string_attribute("member"),
    )
    return agent, role
