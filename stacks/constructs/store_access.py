"""How each runtime of a team on Valkey reaches its store (docs/stacks/stores.md, "Reaching
the instance"): the store's variables in its environment, and its path into the VPC.

A Cloud Run function goes through the team's Serverless VPC Access connector
(`service_config.vpc_connector`, provider 6.50; its Direct VPC egress fields need 7.21 or later)
and is created after it. A Cloud Run service the stack deploys uses Direct VPC egress
(`template.vpc_access.network_interfaces`, provider 6.50) in the team's subnetwork. Both send
private ranges only into the VPC. The constructs that build functions and services stay
store-agnostic: these are set on their resources afterwards, as overrides of the synthesized
arguments, so a team on Firestore synthesizes exactly as before.
"""

from __future__ import annotations

from collections.abc import Mapping

from stacks.constructs import provider
from stacks.constructs.deduplicated_function import DeduplicatedFunction
from stacks.constructs.store_network import EGRESS, StoreNetwork
from stacks.toolchain import TerraformResource


def attach_function(
    function: DeduplicatedFunction, environment: Mapping[str, str], network: StoreNetwork
) -> None:
    """The function gets the store's variables and the connector, and waits for the connector."""
    resource = function.function
    for name, value in environment.items():
        resource.add_override(f"service_config.environment_variables.{name}", value)
    resource.add_override("service_config.vpc_connector", network.connector_id)
    resource.add_override("service_config.vpc_connector_egress_settings", EGRESS)
    resource.depends_on = [*(resource.depends_on or []), _address(network.connector)]


def attach_service(
    service: provider.CloudRunV2Service, environment: Mapping[str, str], network: StoreNetwork
) -> None:
    """The deployed service gets `environment` (every variable it had, and the store's) and
    Direct VPC egress into the team's subnetwork."""
    # Element by element: an override of the whole list is appended to the synthesized one. The
    # new list holds every variable the service had, so it is at least as long and covers it.
    for index, (name, value) in enumerate(sorted(environment.items())):
        service.add_override(f"template.containers.0.env.{index}", {"name": name, "value": value})
    service.add_override(
        "template.vpc_access",
        {
            "network_interfaces": [{"network": network.network_id, "subnetwork": network.subnet_id}],
            "egress": EGRESS,
        },
    )
    service.depends_on = [*(service.depends_on or []), *_created(network)]


def _created(network: StoreNetwork) -> list[str]:
    """The subnetwork, when the stack creates it (a named one is read at plan)."""
    return [_address(network.subnet)] if isinstance(network.subnet, provider.ComputeSubnetwork) else []


def _address(resource: TerraformResource) -> str:
    """A resource's address as `depends_on` lists it, `TYPE.NAME` (its `fqn` is a `${...}` token)."""
    return f"{resource.terraform_resource_type}.{resource.friendly_unique_id}"
