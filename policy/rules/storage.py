"""Storage rules: the team's buckets are private."""

from __future__ import annotations

from policy.synthesized import Resource, Stack
from policy.verdict import Verdict


def bucket_private(resource: Resource, _stack: Stack) -> Verdict:
    """Buckets use uniform access (no object ACLs) and enforce public access prevention."""
    if resource.type != "google_storage_bucket":
        return Verdict.NOT_APPLICABLE
    private = resource.config.get("uniform_bucket_level_access") is True and (
        resource.config.get("public_access_prevention") == "enforced"
    )
    return Verdict.COMPLIANT if private else Verdict.NON_COMPLIANT
