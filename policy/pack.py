"""The least-privilege pack: which rules run, how severe a violation is, and why each matters."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from policy import rules
from policy.rules import Resource, Verdict


@dataclass(frozen=True)
class Rule:
    """A rule in a pack."""

    id: str
    """Stable id printed with findings, e.g. RO-IAM-1."""
    check: Callable[[Resource], Verdict]
    """The rule function."""
    severity: str
    """"error" fails the policy run; "warning" is printed only."""
    explanation: str
    """Why it matters and what to do instead."""


LEAST_PRIVILEGE = [
    Rule(
        "RO-IAM-1",
        rules.no_basic_roles,
        "error",
        "Basic roles (owner/editor/viewer) grant far more than any job needs; grant a predefined role.",
    ),
    Rule(
        "RO-IAM-2",
        rules.no_public_principals,
        "error",
        "allUsers/allAuthenticatedUsers make the resource public; grant to one service account.",
    ),
    Rule(
        "RO-IAM-3",
        rules.role_scoped_to_one_resource,
        "error",
        "Grant on the one resource (bucket, service, repository), or condition a project grant to "
        'one database with resource.name == "projects/P/databases/D".',
    ),
    Rule(
        "RO-IAM-4",
        rules.service_account_used_by_one_component,
        "error",
        "Give every function runtime, build and Scheduler job its own service account, so each "
        "holds only its own permissions (and an unused account is removed).",
    ),
    Rule(
        "RO-IAM-5",
        rules.no_service_account_keys,
        "error",
        "Service account keys are long-lived secrets; use the attached identity or OIDC tokens.",
    ),
    Rule(
        "RO-NET-1",
        rules.ingress_not_open,
        "error",
        'Set ingress to "ALLOW_INTERNAL_ONLY": Scheduler in the same project still reaches it.',
    ),
    Rule(
        "RO-STO-1",
        rules.bucket_private,
        "error",
        'Set uniform_bucket_level_access = true and public_access_prevention = "enforced".',
    ),
]
"""The pack `make policy` and the tests run on every stack."""
