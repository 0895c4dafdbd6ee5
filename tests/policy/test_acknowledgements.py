"""A team file acknowledges a rule, for its whole stack or one resource, only with a reason: the
acknowledgement travels into the synthesized stack, `make policy` shows the finding with the
reason and does not fail on it; a wrong one is a validation error naming the team and field."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

from policy.acknowledgements import Acknowledgements
from policy.runner import check_stack, check_stack_set
from stacks.contract import ACKNOWLEDGED
from stacks.team import REPO_ROOT, load_team_file
from stacks.validate import find_problems

BAD = REPO_ROOT / "tests" / "stacks" / "fixtures" / "bad.tf.json"
LEDGER = "google_project_iam_member.report-identity-runtime-ledger"
REASON = "the vendor's export reads every database of the project (ticket SEC-42)"
TEAM_FILE = """from stacks.team import Job, Team

team = Team(
    name="acme",
    project="acme-prod-1",
    region="europe-west1",
    jobs=[Job(name="report", schedule="0 3 * * *", source="report")],
    alert_emails=["oncall@example.com"],
    acknowledge={acknowledge},
)
"""
ENV = {
    **os.environ,
    "PYTHONPATH": f"{REPO_ROOT}{os.pathsep}{REPO_ROOT / 'functions'}",
    "JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION": "20",
    "CHECKPOINT_DISABLE": "1",
}


def synth(tmp_path: Path, acknowledge: str) -> subprocess.CompletedProcess[str]:
    """`python -O main.py` (what `make synth` runs) on one team file, into tmp_path/out."""
    teams = tmp_path / "teams"
    teams.mkdir(exist_ok=True)
    (teams / "acme.py").write_text(TEAM_FILE.format(acknowledge=acknowledge))
    env = {**ENV, "RUNONCE_TEAMS_DIR": str(teams), "CDKTF_OUTDIR": str(tmp_path / "out")}
    return subprocess.run(
        [sys.executable, "-O", str(REPO_ROOT / "main.py")],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


def make_policy(*targets: Path) -> subprocess.CompletedProcess[str]:
    """`python -m policy` (what `make policy` runs after synth, without checkov) on these targets."""
    return subprocess.run(
        [sys.executable, "-m", "policy", *map(str, targets)],
        cwd=REPO_ROOT,
        env=ENV,
        capture_output=True,
        text=True,
        timeout=120,
    )


def carrying(document: dict[str, Any], acknowledge: dict[str, str]) -> dict[str, Any]:
    """The document with these acknowledgements where a synthesized stack carries them."""
    first, *rest = ACKNOWLEDGED.split(".")
    found = document.setdefault(first, {})
    for key in rest[:-1]:
        found = found.setdefault(key, {})
    found[rest[-1]] = acknowledge
    return document


def test_an_acknowledged_finding_is_shown_with_its_reason_and_does_not_fail_make_policy(tmp_path):
    synthesized = synth(tmp_path, json.dumps({f"RO-IAM-3:{LEDGER}": REASON}))
    assert synthesized.returncode == 0, synthesized.stderr
    file = tmp_path / "out" / "stacks" / "acme" / "cdk.tf.json"
    document = json.loads(file.read_text())
    assert Acknowledgements.of(document).reasons == {f"RO-IAM-3:{LEDGER}": REASON}
    assert make_policy(tmp_path / "out").returncode == 0  # nothing to acknowledge yet

    # The ledger grant broadened to every database of the project, as the team chose.
    del document["resource"]["google_project_iam_member"]["report-identity-runtime-ledger"]["condition"]
    file.write_text(json.dumps(document))
    result = make_policy(tmp_path / "out")
    assert result.returncode == 0, result.stdout
    (line,) = [line for line in result.stdout.splitlines() if "RO-IAM-3" in line]
    assert line.startswith("ACKNOWLEDGED ERROR RO-IAM-3 [acme] acme/report-identity-runtime-ledger ")
    assert f"({LEDGER}): role_scoped_to_one_resource." in line
    assert line.endswith(f"Acknowledged by the team: {REASON}")
    assert "rule pack: 1 stack(s), 0 error(s), 1 acknowledged" in result.stderr

    # The acknowledgement covers that resource and rule only: a public invoker still fails.
    grants = document["resource"]["google_cloud_run_v2_service_iam_member"]
    next(iter(grants.values()))["member"] = "allUsers"
    file.write_text(json.dumps(document))
    result = make_policy(tmp_path / "out")
    assert result.returncode == 1
    # Public, and no longer the Scheduler invoker's grant the job waits for.
    failing = {line.split()[1] for line in result.stdout.splitlines() if line.startswith("ERROR ")}
    assert failing == {"RO-IAM-2", "RO-IAM-11"}
    assert "rule pack: 1 stack(s), 2 error(s), 1 acknowledged" in result.stderr


def test_an_acknowledgement_without_a_reason_or_of_an_unknown_rule_stops_synth(tmp_path):
    result = synth(
        tmp_path, json.dumps({"RO-IAM-33": "a typo", "RO-NET-1": " ", "RO-IAM-1:owner": "no type"})
    )
    assert result.returncode == 1
    assert "Traceback" not in result.stderr
    problems = [line for line in result.stderr.splitlines() if "field acknowledge" in line]
    where = f"{tmp_path / 'teams' / 'acme.py'}: team 'acme', field acknowledge: "
    assert all(line.strip().startswith(f"- {where}") for line in problems)
    assert len(problems) == 3
    unknown, unreasoned, unaddressed = problems
    assert "'RO-IAM-33' acknowledges 'RO-IAM-33', which is not a rule of the policy pack" in unknown
    assert "Fix: write 'RO-IAM-3'." in unknown
    assert "acknowledging 'RO-NET-1' needs a reason" in unreasoned
    assert "'RO-IAM-1:owner' names no resource address after ':'" in unaddressed
    assert not (tmp_path / "out").exists()


def test_an_acknowledgement_that_is_not_a_string_is_a_type_problem(tmp_path):
    result = synth(tmp_path, '{"RO-IAM-3": 3}')
    assert result.returncode == 1
    assert (
        "team 'acme', field acknowledge: {'RO-IAM-3': 3} is a dict; it must be a dict of a string to a string"
        in (result.stderr)
    )


def test_acknowledgements_of_the_pack_s_rules_with_reasons_are_valid():
    team = load_team_file(REPO_ROOT / "teams" / "example.py")
    keys = {"RO-IAM-3": REASON, f"RO-IAM-3:{LEDGER}": REASON, "RO-SET-2:terraform_backend.local": REASON}
    assert find_problems([replace(team, acknowledge=keys)]) == []


def test_a_misspelt_rule_id_is_corrected_with_the_resource_it_names():
    team = replace(
        load_team_file(REPO_ROOT / "teams" / "example.py"), acknowledge={f"RO-IAM3:{LEDGER}": REASON}
    )
    (problem,) = find_problems([team])
    assert (problem.team, problem.job, problem.field) == ("example", None, "acknowledge")
    assert problem.fix == f"write 'RO-IAM-3:{LEDGER}'"


def test_a_stack_wide_acknowledgement_covers_every_finding_of_its_rule_and_no_other():
    document = carrying(json.loads(BAD.read_text()), {"RO-DEP-1": REASON})
    findings = check_stack("bad", document)
    dep = [finding for finding in findings if finding.rule.id == "RO-DEP-1"]
    assert len(dep) == 30  # the Valkey instance that waits for no API is one of them
    assert all(finding.acknowledged == REASON and not finding.fails for finding in dep)
    others = [finding for finding in findings if finding.rule.id != "RO-DEP-1"]
    assert others
    assert all(not finding.acknowledged and finding.fails for finding in others)


def test_a_resource_acknowledgement_covers_that_resource_only():
    document = carrying(json.loads(BAD.read_text()), {"RO-IAM-3:google_project_iam_member.owner": REASON})
    acknowledged = {
        finding.resource.address
        for finding in check_stack("bad", document)
        if finding.rule.id == "RO-IAM-3" and finding.acknowledged
    }
    assert acknowledged == {"google_project_iam_member.owner"}
    # The same resource's RO-IAM-1 and RO-IAM-7 findings are not acknowledged.
    assert {
        finding.rule.id
        for finding in check_stack("bad", document)
        if finding.resource.address == "google_project_iam_member.owner" and not finding.acknowledged
    } == {"RO-IAM-1", "RO-IAM-7"}


def test_an_empty_reason_in_a_stack_acknowledges_nothing():
    document = carrying(json.loads(BAD.read_text()), {"RO-IAM-5": ""})
    (key,) = [finding for finding in check_stack("bad", document) if finding.rule.id == "RO-IAM-5"]
    assert key.fails


def test_a_stack_acknowledges_the_rules_over_all_stacks_for_itself_only():
    twin = REPO_ROOT / "tests" / "stacks" / "fixtures" / "bad-twin.tf.json"
    stacks = {
        "bad": carrying(json.loads(BAD.read_text()), {"RO-SET-2:terraform_backend.local": REASON}),
        "bad-twin": json.loads(twin.read_text()),
    }
    shared_state = [finding for finding in check_stack_set(stacks) if finding.rule.id == "RO-SET-2"]
    assert {(finding.stack, finding.acknowledged) for finding in shared_state} == {
        ("bad", REASON),
        ("bad-twin", ""),
    }


def test_an_acknowledgement_that_matches_no_finding_is_a_warning(tmp_path):
    document = carrying(json.loads(BAD.read_text()), {"RO-IAM-3:google_storage_bucket.nothing": REASON})
    file = tmp_path / "bad.tf.json"
    file.write_text(json.dumps(document))
    result = make_policy(file)
    assert result.returncode == 1  # the bad stack's own findings
    assert (
        "WARNING acknowledgement 'RO-IAM-3:google_storage_bucket.nothing' [bad] matches no finding: "
        "remove it from the team's `acknowledge`" in result.stdout.splitlines()
    )
