"""Rules over all synthesized stacks together: what one stack cannot see on its own.

Each rule takes every stack (name -> synthesized document) and returns the (stack, resource,
detail) triples that break it; `policy.runner` reports each as a finding, with the detail
saying what is shared and with which other stacks.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping
from typing import Any

from policy.synthesized import Resource

# The arguments that name a resource of each type, within its scope (a project, a region) or
# globally: two resources with the same key are the same cloud resource.
NAME_KEYS: dict[str, tuple[str, ...]] = {
    "google_service_account": ("project", "account_id"),
    "google_cloudfunctions2_function": ("project", "location", "name"),
    "google_cloud_scheduler_job": ("project", "region", "name"),
    "google_storage_bucket": ("name",),  # bucket names are global
    "google_artifact_registry_repository": ("project", "location", "repository_id"),
    "google_firestore_database": ("project", "name"),
    "google_pubsub_topic": ("project", "name"),
    "google_pubsub_subscription": ("project", "name"),
}

Offenders = list[tuple[str, Resource, str]]


def _shared(found: list[tuple[str, Resource]], what: str) -> Offenders:
    """Every (stack, resource) of a group that shares `what`, each told the other stacks."""
    stacks = {stack for stack, _ in found}
    return [
        (stack, resource, f"{what} is also used by {', '.join(sorted(stacks - {stack}) or [stack])}")
        for stack, resource in found
    ]


def _provider_defaults(stack: Mapping[str, Any]) -> dict[str, str]:
    """The google provider's project and region: what a resource without its own uses."""
    providers = stack.get("provider", {}).get("google", [{}])
    first = providers[0] if isinstance(providers, list) and providers else {}
    return {"project": first.get("project", ""), "region": first.get("region", "")}


def no_shared_resource_names(stacks: Mapping[str, Mapping[str, Any]]) -> Offenders:
    """No two resources of all the stacks (teams in one project, or one team twice) derive the
    same cloud name: the second apply would fail, or two teams would fight over one resource."""
    owners: dict[tuple[str, ...], list[tuple[str, Resource]]] = defaultdict(list)
    for stack_name, stack in stacks.items():
        defaults = _provider_defaults(stack)
        for kind, keys in NAME_KEYS.items():
            for name, config in stack.get("resource", {}).get(kind, {}).items():
                key = tuple(str(config.get(field) or defaults.get(field, "")) for field in keys)
                owners[(kind, *key)].append((stack_name, Resource(kind, name, config)))
    return [
        offender
        for (kind, *key), found in owners.items()
        if len(found) > 1
        for offender in _shared(found, f"{kind} {'/'.join(key)}")
    ]


def no_shared_state(stacks: Mapping[str, Mapping[str, Any]]) -> Offenders:
    """No two stacks keep their Terraform state in the same place: each would overwrite the
    other's state and then plan to delete the other's resources."""
    users: dict[str, list[tuple[str, Resource]]] = defaultdict(list)
    for stack_name, stack in stacks.items():
        for kind, config in stack.get("terraform", {}).get("backend", {}).items():
            # Local paths are relative to each stack's folder (cdktf.out/stacks/<stack>), and
            # those folders are siblings, so the same text is the same file.
            where = (
                f"gs://{config.get('bucket', '')}/{config.get('prefix', '')}"
                if kind == "gcs"
                else f"{kind} {config.get('path', '')}"
            )
            users[where].append((stack_name, Resource("terraform_backend", kind, config)))
    return [
        offender
        for where, found in users.items()
        if len(found) > 1
        for offender in _shared(found, f"state {where}")
    ]
