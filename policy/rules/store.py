"""Store rules: a Memorystore for Valkey instance that keeps runs keeps them (no eviction), is
reached encrypted and only privately, and no account gets more of it than its own instance
(docs/stacks/stores.md)."""

from __future__ import annotations

from collections.abc import Mapping

from policy.synthesized import Resource, Stack, walk
from policy.verdict import Verdict

INSTANCE = "google_memorystore_instance"
EVICTION = "maxmemory-policy"
STORE_ROLE_PREFIXES = ("roles/memorystore.", "roles/redis.")
"""Memorystore's roles (and Memorystore for Redis's, which cover its clusters): granted on the
project they reach every instance of it."""
WIDE_OPEN = {"0.0.0.0/0", "::/0"}
CONNECTION_ROLE = "roles/memorystore.dbConnectionUser"
"""memorystore.instances.connect alone: what IAM authentication asks of a caller."""


def no_eviction(resource: Resource, _stack: Stack) -> Verdict:
    """A Valkey instance sets `maxmemory-policy` to `noeviction`: Memorystore's default,
    volatile-lru, evicts keys that expire, and every run record does."""
    if resource.type != INSTANCE:
        return Verdict.NOT_APPLICABLE
    configs = resource.config.get("engine_configs")
    policy = configs.get(EVICTION) if isinstance(configs, Mapping) else None
    return Verdict.COMPLIANT if policy == "noeviction" else Verdict.NON_COMPLIANT


def encrypted_in_transit(resource: Resource, _stack: Stack) -> Verdict:
    """A Valkey instance encrypts in transit (server authentication): the ledger's traffic crosses
    the VPC, and the mode can only be chosen when the instance is created."""
    if resource.type != INSTANCE:
        return Verdict.NOT_APPLICABLE
    mode = resource.config.get("transit_encryption_mode")
    return Verdict.COMPLIANT if mode == "SERVER_AUTHENTICATION" else Verdict.NON_COMPLIANT


def no_public_path(resource: Resource, _stack: Stack) -> Verdict:
    """The store is reached only privately: a Valkey instance has its endpoints in a VPC network
    (Private Service Connect: desired endpoints given), and no firewall rule admits the world."""
    config = resource.config
    if resource.type == INSTANCE:
        endpoints = config.get("desired_auto_created_endpoints") or config.get("desired_psc_auto_connections")
        return Verdict.COMPLIANT if endpoints else Verdict.NON_COMPLIANT
    if resource.type == "google_compute_firewall":
        sources = {value for key, value in walk(config) if key == "source_ranges"}
        opened = {text for value in sources for text in (value if isinstance(value, list) else [value])}
        return Verdict.NON_COMPLIANT if opened & WIDE_OPEN else Verdict.COMPLIANT
    return Verdict.NOT_APPLICABLE


def iam_authentication(resource: Resource, _stack: Stack) -> Verdict:
    """A Valkey instance the stack creates authenticates its callers with IAM: the network alone
    would let any workload in the VPC change the ledger."""
    if resource.type != INSTANCE:
        return Verdict.NOT_APPLICABLE
    mode = resource.config.get("authorization_mode")
    return Verdict.COMPLIANT if mode == "IAM_AUTH" else Verdict.NON_COMPLIANT


def instance_names(stack: Stack) -> set[str]:
    """The full name, `projects/P/locations/L/instances/ID`, of every Valkey instance the stack
    creates or reads (its data sources too)."""
    found = {**stack.configs(INSTANCE), **stack.document.get("data", {}).get(INSTANCE, {})}
    return {
        f"projects/{config.get('project')}/locations/{config.get('location')}/instances/{config.get('instance_id')}"
        for config in found.values()
    }


def store_roles_on_instance_only(resource: Resource, stack: Stack) -> Verdict:
    """No Memorystore role is granted on the project (every instance of it) but the connection
    role, conditioned on one instance of the stack by its full name (provider 6.50 has no
    instance-level IAM resource for Memorystore for Valkey)."""
    if resource.type not in {"google_project_iam_member", "google_project_iam_binding"}:
        return Verdict.NOT_APPLICABLE
    role = str(resource.config.get("role", ""))
    if not role.startswith(STORE_ROLE_PREFIXES):
        return Verdict.COMPLIANT
    return Verdict.COMPLIANT if is_connection_grant(resource, stack) else Verdict.NON_COMPLIANT


def is_connection_grant(resource: Resource, stack: Stack) -> bool:
    """A project-level grant of the connection role conditioned on one Valkey instance of the
    stack, by its full name."""
    if resource.type != "google_project_iam_member" or resource.config.get("role") != CONNECTION_ROLE:
        return False
    expression = str((resource.config.get("condition") or {}).get("expression", "")).strip()
    return expression in {f'resource.name == "{name}"' for name in instance_names(stack)}
