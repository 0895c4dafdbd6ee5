"""The network a team's Valkey instance is reached through (docs/stacks/stores.md, "Network"):
the VPC network and subnetwork (named in the team file and read at plan, or created), the
service connection policy that lets Memorystore create its Private Service Connect endpoints in
that subnetwork, and the Serverless VPC Access connector the team's Cloud Run functions reach
them through (their Direct VPC egress fields need provider 7.21 or later).

Shapes, where one resource's value feeds another (provider 6.50 docs): the instance's
`desired_auto_created_endpoints.network` and the policy's `network` take the network's path
`projects/P/global/networks/N` (the network's `id`, not its `self_link` URL); the policy's
`psc_config.subnetworks` takes subnetwork paths `projects/P/regions/R/subnetworks/S` (the
subnetwork's `id`); the connector takes the network's name; a function's `vpc_connector` takes
the connector's path `projects/P/locations/R/connectors/C` (its `id`).
"""

from __future__ import annotations

from dataclasses import dataclass

from constructs import Construct

from stacks.config.store import Network
from stacks.constructs import provider
from stacks.constructs.required_apis import RequiredApis
from stacks.toolchain import ITerraformDependable, TerraformDataSource

SERVICE_CLASS = "gcp-memorystore"
"""The service class of Memorystore for Valkey's connection policies (Memorystore for Valkey,
"Networking": "Use the service class gcp-memorystore")."""
API_COMPUTE = "compute.googleapis.com"
API_NETWORK_CONNECTIVITY = "networkconnectivity.googleapis.com"
API_SERVICE_CONSUMER = "serviceconsumermanagement.googleapis.com"
API_VPC_ACCESS = "vpcaccess.googleapis.com"
API_MEMORYSTORE = "memorystore.googleapis.com"
APIS = (API_COMPUTE, API_NETWORK_CONNECTIVITY, API_SERVICE_CONSUMER, API_VPC_ACCESS, API_MEMORYSTORE)
"""The APIs a Valkey team's stack enables besides every team's: Memorystore for Valkey's "Create
instances" prerequisites as read (Compute Engine, Network Connectivity, Service Consumer
Management, Memorystore; not verified by an apply) and Serverless VPC Access for the connector."""
STORE_PORTS = ("6379", "11000-13047")
"""The ports a client of a Memorystore for Valkey instance needs: 6379 and 11000-13047
(docs/stacks/stores.md)."""
EGRESS = "PRIVATE_RANGES_ONLY"
"""Functions and services send only private-range traffic into the VPC: Google APIs keep their
own path, and the PSC endpoints' addresses are private."""


def network_name(team: str) -> str:
    """The created VPC network's name."""
    return f"runonce-{team}"


def subnet_name(team: str, region: str) -> str:
    """The created subnetwork's name."""
    return f"runonce-{team}-{region}"


def policy_name(team: str) -> str:
    """The service connection policy's name."""
    return f"runonce-{team}-memorystore"


def connector_name(team: str) -> str:
    """The connector's name: at most 25 characters, `^[a-z][-a-z0-9]{0,23}[a-z0-9]$` (provider
    6.50); a team name has at most 20."""
    return f"ro-{team}"


@dataclass(frozen=True)
class StoreNetworkProps:
    """One team's store network."""

    project: str
    region: str
    team: str
    network: Network
    """The team file's choice: names of existing ones, or ranges for created ones."""
    apis: RequiredApis
    machine_type: str = "e2-micro"
    """The connector's machine type."""
    min_instances: int = 2
    """Connector instances always running."""
    max_instances: int = 3
    """Connector instances at most."""
    connection_policy: bool = True
    """Create the service connection policy (False for an existing instance: its endpoints exist)."""


class StoreNetwork(Construct):
    """The network, subnetwork, service connection policy and connector of a team's Valkey store."""

    def __init__(self, scope: Construct, id: str, props: StoreNetworkProps) -> None:
        super().__init__(scope, id)
        self.props = props
        """The props it was built from."""
        net = props.network
        # Named ones are read at plan (no depends_on): a network that does not exist stops the plan.
        self.network: provider.ComputeNetwork | provider.DataGoogleComputeNetwork = (
            provider.DataGoogleComputeNetwork(self, "network", project=props.project, name=net.network)
            if net.network
            else provider.ComputeNetwork(
                self,
                "network",
                project=props.project,
                name=network_name(props.team),
                auto_create_subnetworks=False,
                description=f"runonce team {props.team}: its Valkey store's endpoints and connector",
                depends_on=props.apis.of(API_COMPUTE),
            )
        )
        """The `google_compute_network` (created) or its data source (named)."""
        self.subnet: provider.ComputeSubnetwork | provider.DataGoogleComputeSubnetwork = (
            provider.DataGoogleComputeSubnetwork(
                self, "subnet", project=props.project, region=props.region, name=net.subnet
            )
            if net.subnet
            else provider.ComputeSubnetwork(
                self,
                "subnet",
                project=props.project,
                region=props.region,
                name=subnet_name(props.team, props.region),
                network=self.network.id,
                ip_cidr_range=net.subnet_range,
                private_ip_google_access=True,
                # Flow logs record who connects to the store's endpoints; sampled and aggregated
                # to keep their Logging volume small (docs/stacks/stores.md, "Cost").
                log_config=provider.ComputeSubnetworkLogConfig(
                    aggregation_interval="INTERVAL_5_MIN", flow_sampling=0.1, metadata="EXCLUDE_ALL_METADATA"
                ),
                depends_on=props.apis.of(API_COMPUTE),
            )
        )
        """The `google_compute_subnetwork` (created) or its data source (named)."""
        self.firewall = (
            None
            if net.network
            else provider.ComputeFirewall(
                self,
                "store-egress",
                project=props.project,
                name=f"{network_name(props.team)}-store-egress",
                network=self.network.name,
                description="runonce: the runtimes reach the Valkey store's endpoints in the subnetwork",
                direction="EGRESS",
                destination_ranges=[net.subnet_range],
                allow=[provider.ComputeFirewallAllow(protocol="tcp", ports=list(STORE_PORTS))],
                depends_on=props.apis.of(API_COMPUTE),
            )
        )
        """In a created network, the egress rule that names the store's ports (egress is allowed by
        default; the rule says what the network is for); None in a named network, whose rules its
        owners keep."""
        self.policy = (
            provider.NetworkConnectivityServiceConnectionPolicy(
                self,
                "policy",
                project=props.project,
                location=props.region,
                name=policy_name(props.team),
                service_class=SERVICE_CLASS,
                network=self.network.id,
                description=f"Memorystore endpoints of runonce team {props.team}",
                psc_config=provider.NetworkConnectivityServiceConnectionPolicyPscConfig(
                    subnetworks=[self.subnet.id]
                ),
                depends_on=props.apis.of(API_NETWORK_CONNECTIVITY, API_SERVICE_CONSUMER),
            )
            if props.connection_policy
            else None
        )
        """The `google_network_connectivity_service_connection_policy` the instance's endpoints are
        created under; None for an existing instance."""
        self.connector = provider.VpcAccessConnector(
            self,
            "connector",
            project=props.project,
            region=props.region,
            name=connector_name(props.team),
            network=self.network.name,
            ip_cidr_range=net.connector_range,
            machine_type=props.machine_type,
            min_instances=props.min_instances,
            max_instances=props.max_instances,
            depends_on=[*props.apis.of(API_VPC_ACCESS), *self._created()],
        )
        """The `google_vpc_access_connector` every function of the team egresses through."""

    def _created(self) -> list[ITerraformDependable]:
        return [part for part in (self.network, self.subnet) if not isinstance(part, TerraformDataSource)]

    @property
    def network_id(self) -> str:
        """The network's path, `projects/P/global/networks/N`."""
        return self.network.id

    @property
    def subnet_id(self) -> str:
        """The subnetwork's path, `projects/P/regions/R/subnetworks/S`."""
        return self.subnet.id

    @property
    def connector_id(self) -> str:
        """The connector's path, `projects/P/locations/R/connectors/C`."""
        return self.connector.id
