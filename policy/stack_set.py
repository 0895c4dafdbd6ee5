"""Rules over all synthesized stacks together: what one stack cannot see on its own.

Each rule takes every stack (name -> synthesized document) and returns the (stack, resource)
pairs that break it; `policy.runner` reports each as a finding.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping
from typing import Any

from policy.rules import Resource

# The arguments that name a resource of each type, within its scope (a project, a region) or
# globally: two resources with the same key are the same cloud resource.
NAME_KEYS: dict[str, tuple[str, ...]] = {
    "google_service_account": ("project", "account_id"),
    "google_cloudfunctions2_function": ("project", "location", "name"),
    "google_cloud_scheduler_job": ("project", "region", "name"),
    "google_storage_bucket": ("name",),  # bucket names are global
    "google_artifact_registry_repository": ("project", "location", "repository_id"),
    "google_firestore_database": ("project", "name"),
}

Offenders = list[tuple[str, Resource]]


def _provider_defaults(stack: Mapping[str, Any]) -> dict[str, str]:
    """The google provider's project and region: what a resource without its own uses."""
    providers = stack.get("provider", {}).get("google", [{}])
    first = providers[0] if isinstance(providers, list) and providers else {}
    return {"project": first.get("project", ""), "region": first.get("region", "")}


def no_shared_resource_names(stacks: Mapping[str, Mapping[str, Any]]) -> Offenders:
    """No two resources of all the stacks (teams in one project, or one team twice) derive the
    same cloud name: the second apply would fail, or two teams would fight over one resource."""
    owners: dict[tuple[str, ...], Offenders] = defaultdict(list)
    for stack_name, stack in stacks.items():
        defaults = _provider_defaults(stack)
        for kind, keys in NAME_KEYS.items():
            for name, config in stack.get("resource", {}).get(kind, {}).items():
                key = tuple(str(config.get(field) or defaults.get(field, "")) for field in keys)
                owners[(kind, *key)].append(
                    (stack_name, Resource(type=kind, name=name, config=config, stack=stack))
                )
    return [owner for found in owners.values() if len(found) > 1 for owner in found]


def no_shared_state(stacks: Mapping[str, Mapping[str, Any]]) -> Offenders:
    """No two stacks keep their Terraform state in the same place: each would overwrite the
    other's state and then plan to delete the other's resources."""
    users: dict[str, Offenders] = defaultdict(list)
    for stack_name, stack in stacks.items():
        for kind, config in stack.get("terraform", {}).get("backend", {}).items():
            # Local paths are relative to each stack's folder (cdktf.out/stacks/<stack>), and
            # those folders are siblings, so the same text is the same file.
            where = f"{kind}:{config.get('bucket', '')}/{config.get('prefix', '')}{config.get('path', '')}"
            users[where].append(
                (stack_name, Resource(type="terraform_backend", name=kind, config=config, stack=stack))
            )
    return [user for found in users.values() if len(found) > 1 for user in found]
