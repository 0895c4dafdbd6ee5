"""Where a team's runs are recorded (`Team.store`): Firestore, the default, or Memorystore for
Valkey with the network it is reached through (docs/stacks/stores.md says what each creates, why,
and what it costs).

Plain data, as the rest of `stacks.config`: the stacks build `stacks.constructs.store_network` and
`stacks.constructs.valkey_store` from it, and `stacks.validate.store` checks it at synth.
"""

from __future__ import annotations

from dataclasses import dataclass, field

VALKEY_NODE_TYPES = ("SHARED_CORE_NANO", "STANDARD_SMALL", "HIGHMEM_MEDIUM", "HIGHMEM_XLARGE")
"""The node types `google_memorystore_instance.node_type` takes in provider 6.50."""
APPEND_FSYNC = ("NEVER", "EVERY_SEC", "ALWAYS")
"""AOF fsync modes (`persistence_config.aof_config.append_fsync`, provider 6.50)."""


@dataclass(frozen=True)
class Firestore:
    """The run ledger in the team's own Firestore database (`Team.database`, `Team.collection`,
    `Team.database_location`): what every team has unless it says otherwise."""


@dataclass(frozen=True)
class Network:
    """The VPC network and subnetwork a Valkey instance's endpoints live in, and the runtimes reach
    it through: named (they exist, in the team's project and region) or created by the stack."""

    network: str = ""
    """An existing VPC network of the team's project, by name; "" creates `runonce-<team>`
    (custom subnet mode)."""
    subnet: str = ""
    """An existing subnetwork of `network` in the team's region, by name (needs `network`); ""
    creates `runonce-<team>-<region>` with `subnet_range`."""
    subnet_range: str = "10.64.0.0/24"
    """The created subnetwork's primary range: the PSC endpoints take two addresses of it, and the
    Cloud Run services' Direct VPC egress takes addresses from it too. Ignored with `subnet`."""
    connector_range: str = "10.64.1.0/28"
    """The Serverless VPC Access connector's /28 (Cloud Run functions reach the VPC only through a
    connector in provider 6.50): unused anywhere else in the network."""


@dataclass(frozen=True)
class Valkey:
    """The run ledger on Memorystore for Valkey: one instance, cluster mode disabled (runonce's
    server functions touch a run, its job lock and its index together, which a cluster would route
    to different shards), `maxmemory-policy noeviction`, AOF persistence, in-transit encryption,
    and replicas in other zones. The defaults fit a team of 300 jobs (docs/stacks/stores.md,
    "Sizes")."""

    instance: str = ""
    """The instance id; "" names it `runonce-<team>`."""
    existing: bool = False
    """Read the instance `instance` instead of creating it: the plan stops unless it has eviction
    off, AOF persistence, cluster mode off, in-transit encryption, a replica, the authorization
    mode `iam_auth` asks for, and a primary endpoint in `network` (postconditions of its data
    source)."""
    node_type: str = "STANDARD_SMALL"
    """One of `VALKEY_NODE_TYPES`: STANDARD_SMALL holds 5.2 GB of keys, the records of 300 jobs
    running every minute kept 7 days (SHARED_CORE_NANO has no SLA: for trials only)."""
    replicas: int = 1
    """Replica nodes, 1 or 2, each in another zone: a failover promotes one."""
    wait_replicas: int = 1
    """The replicas each claim and completion waits for (`?replicas=N` in RUNONCE_STORE), 0 to
    `replicas`: a write no replica acknowledged is not trusted (docs/library.md, "The Valkey store")."""
    append_fsync: str = "EVERY_SEC"
    """AOF fsync mode, one of `APPEND_FSYNC`: EVERY_SEC loses at most a second of writes when a
    node restarts; ALWAYS loses none and costs throughput."""
    iam_auth: bool = True
    """IAM authentication (`authorization_mode = IAM_AUTH`, `auth=iam` in RUNONCE_STORE): a caller
    needs roles/memorystore.dbConnectionUser, which the stack grants on this instance alone to the
    team's runtime accounts and operators. False leaves the network as the only boundary. Fixed at
    creation: an instance created without it keeps `False` (docs/stacks/stores.md, "Grants")."""
    deletion_protection: bool = True
    """Refuse to delete the instance (and with it every run record)."""
    network: Network = field(default_factory=Network)
    """Where its endpoints are, and how the functions and services reach them."""
    connector_machine_type: str = "e2-micro"
    """The connector's instances' machine type (f1-micro, e2-micro or e2-standard-4)."""
    connector_min_instances: int = 2
    """Connector instances always running, 2 or more (each is billed as a VM)."""
    connector_max_instances: int = 3
    """Connector instances at most, above `connector_min_instances`, up to 10."""

    def instance_id(self, team: str) -> str:
        """The instance's id: `instance`, or `runonce-<team>`."""
        return self.instance or f"runonce-{team}"
