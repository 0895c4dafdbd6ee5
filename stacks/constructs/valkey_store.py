"""A team's run ledger on Memorystore for Valkey (docs/stacks/stores.md): the instance, created
or read, and what the team's functions and services are told about it (RUNONCE_STORE and
RUNONCE_STORE_CA, `runonce.contract`).

Created: one shard, cluster mode disabled, replicas in other zones, `maxmemory-policy`
`noeviction`, AOF persistence, in-transit encryption (server authentication), IAM authentication
unless the team file turns it off (`Valkey.iam_auth`; the client then sends the runtime account's
access token as AUTH, `auth=iam` in the URL), its
endpoints created by Private Service Connect in the team's subnetwork under the network's
service connection policy, which it is created after. Read: the same, checked by the data
source's postconditions, so the plan stops on an instance that would lose or evict runs.

What flows out, and its shape: the primary endpoint's address and port, taken from the one
`psc_auto_connections` entry of type CONNECTION_TYPE_PRIMARY (the list also holds the reader's,
and the API returns them in no documented order), and the instance's CA certificates as PEM
text from `managed_server_ca[0].ca_certs[*].certificates`.
"""

from __future__ import annotations

from dataclasses import dataclass

from constructs import Construct

from runonce import contract
from stacks.config.store import Valkey
from stacks.constructs import provider
from stacks.constructs.required_apis import RequiredApis
from stacks.constructs.store_network import API_MEMORYSTORE, StoreNetwork
from stacks.toolchain import Postcondition, TerraformLocal, TerraformResourceLifecycle

NO_EVICTION = {"maxmemory-policy": "noeviction"}
"""Memorystore's default `maxmemory-policy` is volatile-lru, which evicts keys with an expiry:
every run record has one (Memorystore for Valkey, "Supported instance configurations")."""
CLUSTER_DISABLED = "CLUSTER_DISABLED"
AOF = "AOF"
TRANSIT_ENCRYPTION = "SERVER_AUTHENTICATION"
IAM_AUTH = "IAM_AUTH"
AUTH_DISABLED = "AUTH_DISABLED"
CONNECTION_ROLE = "roles/memorystore.dbConnectionUser"
"""memorystore.instances.connect alone (Memorystore for Valkey, "Access control")."""
PRIMARY = "CONNECTION_TYPE_PRIMARY"
SCHEME = "valkeys"
"""Every instance the stack creates or accepts encrypts in transit: the URL is TLS's."""


def primaries(instance: str, attribute: str = "", network: str = "") -> str:
    """A Terraform expression listing the instance's primary PSC connections (in `network`, by
    name, if given), or their `attribute`."""
    where = f'c.connection_type == "{PRIMARY}"'
    if network:
        where += f' && endswith(c.network, "/global/networks/{network}")'
    value = f"c.{attribute}" if attribute else "c"
    return f"[for c in {instance}.psc_auto_connections : {value} if {where}]"


def primary(instance: str, attribute: str, network: str = "") -> str:
    """A Terraform expression of `attribute` of the instance's one primary PSC connection; `one()`
    fails the apply if there is not exactly one (the instance's postcondition says why first)."""
    return f"one({primaries(instance, attribute, network)})"


@dataclass(frozen=True)
class ValkeyStoreProps:
    """One team's Valkey store."""

    project: str
    region: str
    team: str
    store: Valkey
    network: StoreNetwork
    apis: RequiredApis


class ValkeyStore(Construct):
    """The instance (or its data source) and the store's URL and CA as Terraform locals."""

    def __init__(self, scope: Construct, id: str, props: ValkeyStoreProps) -> None:
        super().__init__(scope, id)
        self.props = props
        """The props it was built from."""
        store = props.store
        self.instance_id = store.instance_id(props.team)
        """The instance's id."""
        self.instance: provider.MemorystoreInstance | provider.DataGoogleMemorystoreInstance = (
            self._read() if store.existing else self._create()
        )
        """The `google_memorystore_instance` or its data source."""
        fqn = self.instance.fqn
        network = store.network.network if store.existing else ""
        host, port = primary(fqn, "ip_address", network), primary(fqn, "port", network)
        auth = "&auth=iam" if store.iam_auth else ""
        self.url = TerraformLocal(
            self, "store-url", f"{SCHEME}://${{{host}}}:${{{port}}}?replicas={store.wait_replicas}{auth}"
        ).as_string
        """RUNONCE_STORE: `valkeys://ADDRESS:PORT?replicas=N[&auth=iam]`, the primary endpoint's."""
        self.ca = TerraformLocal(
            self,
            "store-ca",
            f'${{join("\\n", flatten([for ca in {fqn}.managed_server_ca[0].ca_certs : ca.certificates]))}}',
        ).as_string
        """RUNONCE_STORE_CA: the instance's CA certificates, PEM, one after the other."""

    @property
    def resource_name(self) -> str:
        """The instance's full name, `projects/P/locations/R/instances/ID`, as IAM conditions
        compare `resource.name` with it (the provider's `id` has the same shape)."""
        props = self.props
        return f"projects/{props.project}/locations/{props.region}/instances/{self.instance_id}"

    @property
    def authorization_mode(self) -> str:
        """The authorization mode the team file asks for."""
        return IAM_AUTH if self.props.store.iam_auth else AUTH_DISABLED

    def grant_connection(self, name: str, principal: str) -> provider.ProjectIamMember | None:
        """roles/memorystore.dbConnectionUser for `principal` (an IAM member string) on this
        instance only, or None when the instance does not use IAM authentication. Provider 6.50 has
        no instance-level IAM resource for Memorystore for Valkey: the grant is the project's,
        narrowed by an IAM condition on the instance's full name (docs/stacks/stores.md)."""
        if not self.props.store.iam_auth:
            return None
        return provider.ProjectIamMember(
            self,
            f"connect-{name}",
            project=self.props.project,
            role=CONNECTION_ROLE,
            member=principal,
            condition=provider.ProjectIamMemberCondition(
                title="runonce-valkey-connect",
                description=f"Only the {self.instance_id} Memorystore instance",
                expression=f'resource.name == "{self.resource_name}"',
            ),
        )

    @property
    def environment(self) -> dict[str, str]:
        """The variables every function, service and the watchdog of the team get."""
        return {contract.STORE_VARIABLE: self.url, contract.STORE_CA_VARIABLE: self.ca}

    def _create(self) -> provider.MemorystoreInstance:
        props, store = self.props, self.props.store
        policy = [props.network.policy] if props.network.policy is not None else []
        return provider.MemorystoreInstance(
            self,
            "instance",
            project=props.project,
            location=props.region,
            instance_id=self.instance_id,
            mode=CLUSTER_DISABLED,
            shard_count=1,
            replica_count=store.replicas,
            node_type=store.node_type,
            engine_configs=NO_EVICTION,
            persistence_config=provider.MemorystoreInstancePersistenceConfig(
                mode=AOF,
                aof_config=provider.MemorystoreInstancePersistenceConfigAofConfig(
                    append_fsync=store.append_fsync
                ),
            ),
            transit_encryption_mode=TRANSIT_ENCRYPTION,
            authorization_mode=self.authorization_mode,
            zone_distribution_config=provider.MemorystoreInstanceZoneDistributionConfig(mode="MULTI_ZONE"),
            deletion_protection_enabled=store.deletion_protection,
            desired_auto_created_endpoints=[
                provider.MemorystoreInstanceDesiredAutoCreatedEndpoints(
                    network=props.network.network_id, project_id=props.project
                )
            ],
            # The endpoints are created under the policy: without it the instance waits, then fails.
            depends_on=[*props.apis.of(API_MEMORYSTORE), *policy],
            lifecycle=TerraformResourceLifecycle(
                postcondition=[
                    Postcondition(
                        condition=f"${{length({primaries('self')}) == 1}}",
                        error_message=f"Memorystore instance {self.instance_id} has no single primary "
                        "endpoint "
                        "(psc_auto_connections of type CONNECTION_TYPE_PRIMARY): the functions would have no "
                        "address to connect to. Check the service connection policy "
                        "(gcloud network-connectivity service-connection-policies list) and the instance's "
                        "endpoints (gcloud memorystore instances describe).",
                    )
                ]
            ),
        )

    def _read(self) -> provider.DataGoogleMemorystoreInstance:
        props, store = self.props, self.props.store
        where = f"Memorystore instance {self.instance_id} ({props.project}, {props.region})"
        update = f"gcloud memorystore instances update {self.instance_id} --location={props.region}"
        network = store.network.network
        conditions = [
            (
                f'self.mode == "{CLUSTER_DISABLED}"',
                f"{where} runs in cluster mode (${{self.mode}}): runonce's functions touch a run, its job "
                "lock and its index together, which a cluster routes to different shards. Create an "
                "instance with --mode=cluster-disabled.",
            ),
            (
                'lookup(self.engine_configs, "maxmemory-policy", "") == "noeviction"',
                f"{where} may evict run records: its maxmemory-policy is not noeviction (unset, "
                "Memorystore uses volatile-lru, which evicts keys with an expiry, and every run record "
                f"has one): a record evicted is a run that runs again. Fix: {update} "
                "--engine-configs=maxmemory-policy=noeviction",
            ),
            (
                f'try(self.persistence_config[0].mode, "") == "{AOF}"',
                f"{where} does not persist with AOF (RDB snapshots or none): a restart would forget the "
                f"runs written since the last snapshot. Fix: {update} --persistence-mode=aof",
            ),
            (
                f'self.transit_encryption_mode == "{TRANSIT_ENCRYPTION}"',
                f"{where} does not encrypt in transit (${{self.transit_encryption_mode}}), which can only "
                "be chosen at creation: create one with --transit-encryption-mode=server-authentication.",
            ),
            (
                "self.replica_count >= 1",
                f"{where} has no replica (${{self.replica_count}}): a zone's outage loses the ledger. Fix: "
                f"{update} --replica-count=1",
            ),
            (
                f'self.authorization_mode == "{self.authorization_mode}"',
                f"{where} has authorization mode ${{self.authorization_mode}} and the team file asks for "
                f"{self.authorization_mode} (Valkey(iam_auth={store.iam_auth})): the functions' AUTH would "
                "not match the instance's and every connection would be refused. Fix: set "
                "Valkey(iam_auth=...) to match the instance, or name an instance created with "
                f"--auth-mode={'iam-auth' if store.iam_auth else 'auth-disabled'}.",
            ),
            (
                f"length({primaries('self', network=network)}) == 1",
                f"{where} has no primary endpoint in network {network}, which the team file names and the "
                "functions' connector is in: name the network its endpoints are in (Network(network=...)).",
            ),
        ]
        return provider.DataGoogleMemorystoreInstance(
            self,
            "instance",
            project=props.project,
            location=props.region,
            instance_id=self.instance_id,
            # No depends_on: an instance that exists has its API enabled; a data source that waits
            # for resources still to be created is read only during the apply.
            lifecycle=TerraformResourceLifecycle(
                postcondition=[
                    Postcondition(condition=f"${{{condition}}}", error_message=message)
                    for condition, message in conditions
                ]
            ),
        )
