"""A team's store (`Team.store`, stacks/config/store.py): for Memorystore for Valkey, a region
that offers it, sizes in Memorystore's and Serverless VPC Access's ranges, a network that is
named whole, address ranges that fit, and no part of the team that would keep using Firestore
(docs/stacks/stores.md)."""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Iterator

from stacks.config.problem import Problem, ProblemAt
from stacks.config.store import APPEND_FSYNC, VALKEY_NODE_TYPES, Valkey
from stacks.config.team import Team
from stacks.locations import VALKEY_REGIONS

INSTANCE_ID = re.compile(r"^[a-z0-9][a-z0-9-]{2,61}[a-z0-9]$")
"""An instance id: 4-63 lowercase letters, digits and hyphens, starting with a letter or digit, not
ending with a hyphen (provider 6.50, `google_memorystore_instance.instance_id`)."""
NETWORK_NAME = re.compile(r"^[a-z]([-a-z0-9]{0,61}[a-z0-9])?$")
"""A Compute Engine resource name (RFC 1035, at most 63 characters): a network's or subnetwork's."""
MAX_REPLICAS = 2
"""Replica nodes per shard: "0, 1, or 2" (Memorystore for Valkey overview)."""
CONNECTOR_MACHINE_TYPES = ("f1-micro", "e2-micro", "e2-standard-4")
"""`google_vpc_access_connector.machine_type` values (Serverless VPC Access, "Configure connectors")."""
CONNECTOR_INSTANCES = (2, 10)
"""A connector's min_instances is at least 2 and its max_instances at most 10, above the minimum
(provider 6.50 `google_vpc_access_connector`)."""
CONNECTOR_PREFIX = 28
"""A connector's own range is a /28 (`ip_cidr_range`, provider 6.50)."""
MAX_SUBNET_PREFIX = 26
"""The smallest subnetwork the stack creates: the PSC endpoints and Cloud Run's Direct VPC egress
(addresses per instance as services scale) share it; /26 is our floor, not a documented minimum."""


def store_problems(team: Team) -> Iterator[Problem]:
    """Every problem of the team's store; none for Firestore."""
    store = team.store
    if not isinstance(store, Valkey):
        return

    def problem(field: str, message: str, fix: str) -> Problem:
        return Problem(team.name, None, f"store.{field}", message, fix)

    if team.region not in VALKEY_REGIONS:
        yield Problem(
            team.name,
            None,
            "region",
            f"Memorystore for Valkey is not offered in {team.region!r}",
            "choose a region the locations page lists (https://cloud.google.com/memorystore/docs/valkey/"
            "locations; stacks/locations.py VALKEY_REGIONS), or keep store=Firestore()",
        )
    if store.instance and not INSTANCE_ID.match(store.instance):
        yield problem(
            "instance",
            f"{store.instance!r} is not an instance id",
            "use 4-63 lowercase letters, digits and hyphens, starting with a letter or digit and not "
            'ending with a hyphen, or "" for runonce-<team>',
        )
    if store.existing and not store.instance:
        yield problem(
            "instance",
            "existing=True needs the instance to read",
            "name it: Valkey(instance=..., existing=True, network=Network(network=...))",
        )
    if store.existing and not store.network.network:
        yield problem(
            "network.network",
            "an existing instance is reached through the network its endpoints are in, and none is named",
            "name that VPC network: Network(network=...)",
        )
    if store.node_type not in VALKEY_NODE_TYPES:
        yield problem(
            "node_type",
            f"{store.node_type!r} is not a node type",
            f"use one of {', '.join(VALKEY_NODE_TYPES)}",
        )
    if not 1 <= store.replicas <= MAX_REPLICAS:
        yield problem(
            "replicas",
            f"{store.replicas} replicas: a failover needs a replica in another zone, and a shard has at most "
            f"{MAX_REPLICAS}",
            "set replicas=1 or 2",
        )
    if not 0 <= store.wait_replicas <= max(store.replicas, 0):
        yield problem(
            "wait_replicas",
            f"waits for {store.wait_replicas} replicas of {store.replicas}: every claim would fail",
            f"set wait_replicas between 0 and replicas ({store.replicas})",
        )
    if store.append_fsync not in APPEND_FSYNC:
        yield problem(
            "append_fsync",
            f"{store.append_fsync!r} is not an AOF fsync mode",
            f"use one of {', '.join(APPEND_FSYNC)}",
        )
    yield from _operators(team, store)
    yield from _network(store, problem)
    yield from _connector(store, problem)
    yield from _mixed(team)


IAM_AUTH_PRINCIPALS = ("user:", "serviceAccount:")
"""The principals IAM authentication admits to an instance: "a user account, and a service account
... Other principal types, such as Google groups, Google Workspace domains, or Cloud Identity
domains are not yet supported for IAM authentication" (Memorystore for Valkey, About IAM
authentication, "Principals")."""


def _operators(team: Team, store: Valkey) -> Iterator[Problem]:
    """Every operator of an IAM-authenticated instance one that can connect to it: every `runonce`
    verb on a Valkey team reads or writes the instance, so a group's members could run none."""
    if not store.iam_auth:
        return
    for index, entry in enumerate(team.operators):
        if ":" in entry and not entry.startswith(IAM_AUTH_PRINCIPALS):
            yield Problem(
                team.name,
                None,
                "operators",
                f"operators[{index}] {entry!r} cannot connect to a Valkey instance with IAM authentication "
                "(Memorystore admits user and service accounts only, not groups or domains), so its members "
                "could run no runonce command",
                "name each operator as user:EMAIL or serviceAccount:EMAIL on a Valkey team, or keep "
                "store=Firestore()",
            )


def _network(store: Valkey, make: ProblemAt) -> Iterator[Problem]:
    net = store.network
    for field in ("network", "subnet"):
        name = getattr(net, field)
        if name and not NETWORK_NAME.match(name):
            yield make(
                f"network.{field}",
                f"{name!r} is not a {field} name",
                "give its name (not a self link or a path): lowercase letters, digits, hyphens, at most 63",
            )
    if net.subnet and not net.network:
        yield make(
            "network.subnet",
            f"subnet {net.subnet!r} is named without its network",
            "name the VPC network it belongs to: Network(network=..., subnet=...)",
        )
    connector = _range(net.connector_range)
    if connector is None or connector.prefixlen != CONNECTOR_PREFIX or not connector.is_private:
        yield make(
            "network.connector_range",
            f"{net.connector_range!r} is not a private /{CONNECTOR_PREFIX}",
            "give an unused private /28, e.g. 10.64.1.0/28",
        )
    if net.subnet:
        return
    subnet = _range(net.subnet_range)
    if subnet is None or subnet.prefixlen > MAX_SUBNET_PREFIX or not subnet.is_private:
        yield make(
            "network.subnet_range",
            f"{net.subnet_range!r} is not a private range of /{MAX_SUBNET_PREFIX} or larger",
            "give an unused private range, e.g. 10.64.0.0/24",
        )
    elif connector is not None and subnet.overlaps(connector):
        yield make(
            "network.connector_range",
            f"{net.connector_range} overlaps the subnetwork's range {net.subnet_range}",
            "give the connector a /28 outside subnet_range",
        )


def _connector(store: Valkey, problem: ProblemAt) -> Iterator[Problem]:
    low, high = CONNECTOR_INSTANCES
    if store.connector_machine_type not in CONNECTOR_MACHINE_TYPES:
        yield problem(
            "connector_machine_type",
            f"{store.connector_machine_type!r} is not a connector machine type",
            f"use one of {', '.join(CONNECTOR_MACHINE_TYPES)}",
        )
    if not low <= store.connector_min_instances < store.connector_max_instances <= high:
        yield problem(
            "connector_min_instances",
            f"connector instances {store.connector_min_instances} to {store.connector_max_instances} "
            "are out of range",
            f"set {low} <= connector_min_instances < connector_max_instances <= {high}",
        )


def _mixed(team: Team) -> Iterator[Problem]:
    """The parts of a team the stack cannot point at Valkey: they would record runs in Firestore
    while the rest records them in Valkey, and the watchdog and operators read one of the two."""
    if team.app_engine_jobs:
        yield Problem(
            team.name,
            None,
            "app_engine_jobs",
            "App Engine jobs run in an application the stack does not deploy: it cannot give them "
            "RUNONCE_STORE or a path into the VPC, so their runs would stay in Firestore",
            "keep store=Firestore() for this team, or move the App Engine jobs to a team on Firestore",
        )
    for service in team.services:
        if not service.image:
            yield Problem(
                team.name,
                None,
                f"services[{service.name}]",
                "an existing service keeps its own environment and network: the stack cannot point it "
                "at the Valkey instance",
                "give the service an image so the stack deploys it, or keep store=Firestore()",
            )


def _range(text: str) -> ipaddress.IPv4Network | ipaddress.IPv6Network | None:
    try:
        return ipaddress.ip_network(text, strict=True)
    except ValueError:
        return None
