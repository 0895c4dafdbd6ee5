"""Checkov, offline, on synthesized stacks, with the few checks we skip and why."""

from __future__ import annotations

import json
import os
import subprocess
from dataclasses import dataclass
from pathlib import Path

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
    """Run checkov on one synthesized stack file; its failed checks (skips excluded)."""
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
    failures = []
    for report in reports if isinstance(reports, list) else [reports]:
        for check in report.get("results", {}).get("failed_checks", []):
            failures.append(CheckovFailure(stack, check["check_id"], check["resource"], check["check_name"]))
    return failures
