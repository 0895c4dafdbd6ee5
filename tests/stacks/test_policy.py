"""The least-privilege pack and checkov: the example teams pass, the deliberately bad stack fails."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from policy.checkov import SKIPPED, run_checkov
from policy.pack import LEAST_PRIVILEGE
from policy.runner import check_stack
from stacks.team import REPO_ROOT

BAD = Path(__file__).parent / "fixtures" / "bad.tf.json"
CHECKOV = REPO_ROOT / ".venv" / "checkov" / "bin" / "checkov"
needs_checkov = pytest.mark.skipif(
    not CHECKOV.exists(), reason=f"checkov is not installed at {CHECKOV}: `make test` installs it"
)


def flagged(stack: dict) -> set[tuple[str, str]]:
    """(rule id, resource path) of every finding."""
    return {(finding.rule.id, finding.resource.path) for finding in check_stack("stack", stack)}


def test_example_teams_pass_the_pack(example, payments):
    assert flagged(example.document) == set()
    assert flagged(payments.document) == set()


def test_the_bad_stack_is_flagged_by_every_rule_at_the_right_resource():
    assert flagged(json.loads(BAD.read_text())) == {
        ("RO-IAM-1", "bad/owner"),
        ("RO-IAM-3", "bad/owner"),
        ("RO-IAM-3", "bad/ledger-everywhere"),
        ("RO-IAM-2", "bad/public-invoker"),
        ("RO-IAM-4", "bad/shared-account"),
        ("RO-IAM-4", "bad/unused-account"),
        ("RO-IAM-5", "bad/shared-key"),
        ("RO-NET-1", "bad/open-function"),
        ("RO-STO-1", "bad/acl-bucket"),
    }


def test_every_rule_of_the_pack_fires_on_the_bad_stack():
    fired = {rule_id for rule_id, _ in flagged(json.loads(BAD.read_text()))}
    assert fired == {rule.id for rule in LEAST_PRIVILEGE}


def test_a_function_without_ingress_setting_counts_as_open(example):
    stack = json.loads(example.json)
    for config in stack["resource"]["google_cloudfunctions2_function"].values():
        del config["service_config"]["ingress_settings"]
    assert {rule for rule, _ in flagged(stack)} == {"RO-NET-1"}


def test_policy_command_fails_on_the_bad_stack_and_prints_resource_paths():
    completed = subprocess.run(
        [sys.executable, "-m", "policy", str(BAD)], capture_output=True, text=True, cwd=REPO_ROOT, check=False
    )
    assert completed.returncode == 1
    assert "ERROR RO-IAM-1 [bad] bad/owner (google_project_iam_member.owner)" in completed.stdout


def test_every_checkov_skip_says_why():
    assert all(len(reason) > 40 for reason in SKIPPED.values())


@needs_checkov
def test_checkov_finds_nothing_on_the_example_teams(example, payments, tmp_path):
    for synth in (example, payments):
        file = tmp_path / f"{synth.team.name}.tf.json"
        file.write_text(synth.json)
        assert run_checkov(CHECKOV, synth.team.name, file) == []


@needs_checkov
def test_checkov_fails_the_bad_stack():
    failed = {failure.check_id for failure in run_checkov(CHECKOV, "bad", BAD)}
    assert {"CKV_GCP_117", "CKV_GCP_124", "CKV_GCP_29", "CKV_GCP_114"} <= failed
