"""Checkov, offline, on synthesized stacks, with the few checks we skip and why."""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from policy.grants import is_build_trigger_grant, is_service_agent_grant
from policy.synthesized import Resource, Stack

SKIPPED = {
    "CKV_GCP_62": "The source bucket holds only build inputs read by the team's build accounts; "
    "Cloud Audit Logs record data access if a project turns them on, so a second bucket for "
    "usage logs would be one more resource to secure for no new information.",
    "CKV_GCP_84": "Customer-managed encryption needs a KMS key the team owns and operates; images "
    "are rebuilt from the source archive at any time, so Google-managed encryption is the default. "
    "Set kms_key_name on the repository when a team's data policy requires CMEK.",
    "CKV_GCP_83": "An event job's topics hold messages for at most the retry window (7 days at "
    "most) and are encrypted with Google-managed keys; customer-managed keys need a KMS key the "
    "team owns and a grant to the Pub/Sub service agent. Set kms_key_name on the topics when a "
    "team's data policy requires CMEK.",
}
"""Check id -> why it does not apply to runonce stacks."""

ACCEPTED: dict[str, tuple[str, Callable[[Resource, Stack], bool]]] = {
    "CKV_GCP_49": (
        "A proxy that runs a Cloud Build trigger needs cloudbuild.builds.create on the trigger "
        "(projects.locations.triggers.run), and nothing narrower than a project grant exists: the "
        "triggers API has no IAM policy of its own (its methods are create, delete, get, list, "
        "patch, run and webhook; the provider has no trigger IAM resource), Cloud Build is not "
        "among the services that evaluate resource attributes in IAM conditions. The predefined "
        "role is roles/cloudbuild.builds.editor; a custom role could drop its other permissions "
        "but not cloudbuild.builds.create, the one behind CKV_GCP_49's concern. "
        "Accepted only on that exact grant (policy.grants.is_build_trigger_grant, which RO-IAM-8 "
        "also checks); CKV_GCP_49 on any other resource still fails (docs/targets.md). "
        "And on the Eventarc service agent's own role, roles/eventarc.serviceAgent, granted to "
        "that agent alone (the google_project_service_identity of eventarc.googleapis.com) at "
        "project level, the only level it has: Google grants it there by default when the first "
        "Eventarc resource is created, and a trigger is refused until it is in effect "
        "(policy.grants.is_service_agent_grant, docs/stacks.md). "
        "And, the same way, on the Pub/Sub service agent's own role, roles/pubsub.serviceAgent, "
        "granted to that agent alone (the google_project_service_identity of pubsub.googleapis.com): "
        "an agent created on request gets no role by itself (IAM, 'Create and grant roles to "
        "service agents').",
        lambda grant, stack: is_build_trigger_grant(grant, stack) or is_service_agent_grant(grant, stack),
    ),
}
"""Check id -> (why, which resources): failed checks accepted on those resources only, unlike
SKIPPED, which checkov never runs."""

# The resource types CKV_GCP_49 (and any accepted check) may report, looked up by the name
# checkov prints (`resource.NAME` for Terraform JSON, or `TYPE.NAME`).
ACCEPTED_TYPES = ("google_project_iam_member", "google_project_iam_binding")


def accepted(check_id: str, resource: str, stack: Mapping[str, Any]) -> bool:
    """Whether checkov's failed `check_id` on `resource` is one of the ACCEPTED exact grants."""
    if check_id not in ACCEPTED:
        return False
    name = resource.rpartition(".")[2]
    synthesized = Stack(stack)
    found = [grant for grant in synthesized.of_type(*ACCEPTED_TYPES) if grant.name == name]
    _, applies = ACCEPTED[check_id]
    return bool(found) and all(applies(candidate, synthesized) for candidate in found)


@dataclass(frozen=True)
class CheckovFailure:
    """One failed checkov check."""

    stack: str
    check_id: str
    resource: str
    title: str

    def __str__(self) -> str:
        return f"ERROR {self.check_id} [{self.stack}] {self.resource}: {self.title} (checkov)"


def run_checkov(checkov: Path, stack: str, file: Path) -> list[CheckovFailure]:
    """Run checkov on one synthesized stack file; its failed checks (skips and the ACCEPTED exact
    grants excluded)."""
    # No vendor API calls: no guideline download, no policy-metadata mapping.
    env = {**os.environ, "BC_SKIP_MAPPING": "TRUE", "CKV_NO_BANNER": "1"}
    command = [
        str(checkov),
        "--file",
        str(file),
        "--framework",
        "terraform_json",
        "--skip-download",
        "--quiet",
        "--compact",
        "--output",
        "json",
        "--skip-check",
        ",".join(sorted(SKIPPED)),
    ]
    completed = subprocess.run(command, capture_output=True, text=True, env=env, check=False)
    if completed.returncode not in (0, 1) or not completed.stdout.strip():
        raise RuntimeError(f"checkov failed on {file}: {completed.stderr.strip()[-2000:]}")
    reports = json.loads(completed.stdout)
    document = json.loads(file.read_text())
    failures = []
    for report in reports if isinstance(reports, list) else [reports]:
        for check in report.get("results", {}).get("failed_checks", []):
            if not accepted(check["check_id"], check["resource"], document):
                failures.append(
                    CheckovFailure(stack, check["check_id"], check["resource"], check["check_name"])
                )
    return failures
