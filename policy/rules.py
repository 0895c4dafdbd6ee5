"""One function per rule: a synthesized resource in, COMPLIANT / NON_COMPLIANT / NOT_APPLICABLE out.

Rules read Terraform JSON as cdktf writes it (`cdk.tf.json`): references are `${type.name.attr}`
strings, IAM grants are `google_*_iam_member` / `_binding` resources with `role` and `member(s)`.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from enum import Enum
from typing import Any


class Verdict(Enum):
    """Outcome of one rule on one resource."""

    COMPLIANT = "compliant"
    NON_COMPLIANT = "non_compliant"
    NOT_APPLICABLE = "not_applicable"


@dataclass(frozen=True)
class Resource:
    """One resource of a synthesized stack, with the stack around it (for cross-resource rules)."""

    type: str
    """Terraform resource type, e.g. google_project_iam_member."""
    name: str
    """Terraform resource name (cdktf's logical id)."""
    config: Mapping[str, Any]
    """The resource's arguments."""
    stack: Mapping[str, Any]
    """The whole synthesized stack document."""

    @property
    def address(self) -> str:
        """`type.name`, as Terraform names it."""
        return f"{self.type}.{self.name}"

    @property
    def path(self) -> str:
        """The construct path (e.g. example/report-function/runtime-ledger) when cdktf recorded it."""
        return self.config.get("//", {}).get("metadata", {}).get("path", self.address)


BASIC_ROLES = {"roles/owner", "roles/editor", "roles/viewer"}
PUBLIC_MEMBERS = {"allUsers", "allAuthenticatedUsers"}
# Grants that apply to a whole project, folder or organization (not to one resource).
BROAD_IAM_TYPES = re.compile(r"^google_(project|folder|organization)_iam_(member|binding)$")
ONE_DATABASE_CONDITION = re.compile(r'^resource\.name\s*==\s*"projects/[^/"]+/databases/[^/"]+"$')
# Roles that exist only at project level and only write: log entries cannot be scoped further.
PROJECT_ONLY_ROLES = {"roles/logging.logWriter"}
# Arguments that make a service account the identity a component runs or calls as.
IDENTITY_ARGUMENTS = {"service_account_email", "service_account", "service_account_name"}
SERVING_TYPES = {
    "google_cloudfunctions2_function",
    "google_cloudfunctions_function",
    "google_cloud_run_v2_service",
}
OPEN_INGRESS = {"ALLOW_ALL", "INGRESS_TRAFFIC_ALL"}
INGRESS_ARGUMENTS = {"ingress_settings", "ingress"}


def _is_iam(resource: Resource) -> bool:
    """An IAM grant resource (member or binding) of any kind."""
    return bool(re.match(r"^google_.*_iam_(member|binding)$", resource.type))


def _members(resource: Resource) -> list[str]:
    """The principals an IAM member or binding grants to."""
    members = resource.config.get("members", [])
    return [resource.config["member"]] if "member" in resource.config else list(members)


def _walk(value: Any, key: str = "") -> Iterator[tuple[str, Any]]:
    """Every (argument name, value) pair inside a nested resource config."""
    if isinstance(value, Mapping):
        for child_key, child in value.items():
            if child_key != "//":
                yield from _walk(child, child_key)
    elif isinstance(value, list):
        for child in value:
            yield from _walk(child, key)
    else:
        yield key, value


def no_basic_roles(resource: Resource) -> Verdict:
    """Owner, editor and viewer grant thousands of permissions: never grant them."""
    if not _is_iam(resource):
        return Verdict.NOT_APPLICABLE
    return Verdict.NON_COMPLIANT if resource.config.get("role") in BASIC_ROLES else Verdict.COMPLIANT


def no_public_principals(resource: Resource) -> Verdict:
    """allUsers / allAuthenticatedUsers make a resource public (to anyone with a Google account)."""
    if not _is_iam(resource):
        return Verdict.NOT_APPLICABLE
    return Verdict.NON_COMPLIANT if PUBLIC_MEMBERS & set(_members(resource)) else Verdict.COMPLIANT


def role_scoped_to_one_resource(resource: Resource) -> Verdict:
    """A role is granted on one resource, or at project level with a condition naming one database."""
    if not _is_iam(resource):
        return Verdict.NOT_APPLICABLE
    if not BROAD_IAM_TYPES.match(resource.type) or resource.config.get("role") in PROJECT_ONLY_ROLES:
        return Verdict.COMPLIANT
    expression = resource.config.get("condition", {}).get("expression", "")
    return Verdict.COMPLIANT if ONE_DATABASE_CONDITION.match(expression.strip()) else Verdict.NON_COMPLIANT


def service_account_used_by_one_component(resource: Resource) -> Verdict:
    """Each service account is the identity of exactly one component (function, build or job)."""
    if resource.type != "google_service_account":
        return Verdict.NOT_APPLICABLE
    reference = f"${{google_service_account.{resource.name}."
    users = {
        f"{kind}.{name}"
        for kind, resources in resource.stack.get("resource", {}).items()
        for name, config in resources.items()
        if any(
            key in IDENTITY_ARGUMENTS and isinstance(value, str) and reference in value
            for key, value in _walk(config)
        )
    }
    return Verdict.COMPLIANT if len(users) == 1 else Verdict.NON_COMPLIANT


def no_service_account_keys(resource: Resource) -> Verdict:
    """Exported keys are long-lived secrets; components use their attached identity instead."""
    return Verdict.NON_COMPLIANT if resource.type == "google_service_account_key" else Verdict.NOT_APPLICABLE


def ingress_not_open(resource: Resource) -> Verdict:
    """Functions and Cloud Run services accept internal traffic only (no setting means open)."""
    if resource.type not in SERVING_TYPES:
        return Verdict.NOT_APPLICABLE
    settings = {value for key, value in _walk(resource.config) if key in INGRESS_ARGUMENTS}
    return Verdict.COMPLIANT if settings and not settings & OPEN_INGRESS else Verdict.NON_COMPLIANT


def bucket_private(resource: Resource) -> Verdict:
    """Buckets use uniform access (no object ACLs) and enforce public access prevention."""
    if resource.type != "google_storage_bucket":
        return Verdict.NOT_APPLICABLE
    private = resource.config.get("uniform_bucket_level_access") is True and (
        resource.config.get("public_access_prevention") == "enforced"
    )
    return Verdict.COMPLIANT if private else Verdict.NON_COMPLIANT
