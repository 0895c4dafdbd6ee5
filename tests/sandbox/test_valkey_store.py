"""A team on Memorystore for Valkey, deployed to the sandbox project (docs/stacks/stores.md): its
own stack (the instance, the network, the connection policy, the connector, one scheduled job and
its function), applied, a run forced twice, and the answers read back: the run is `completed`
once and `duplicate` after, and its record is not in the team's Firestore database, so the
deduplication went through the Valkey instance the function reached through the connector.

Opt-in on top of the sandbox's variables, `RUNONCE_SANDBOX_VALKEY=1`: the instance takes tens of
minutes to create and is billed by the node-hour while it lives (the test destroys it).
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from stacks.team import REPO_ROOT, Job, Network, Team, Valkey
from tests.sandbox.cloud import force_run, log_entries, rfc3339
from tests.sandbox.variables import VALKEY_VARIABLE
from tests.sandbox.waiting import wait_for

VALKEY_OUT = REPO_ROOT / "build" / "sandbox-valkey"
TEAM = "sbx-valkey"
JOB = "tally"
ANSWERED_WITHIN = 5 * 60
CLOCK_MARGIN = timedelta(minutes=1)
FIRESTORE = "https://firestore.googleapis.com/v1"


def valkey_team(project: str, region: str) -> Team:
    """One scheduled job on a Valkey store the stack creates with its network; nothing kept after
    the destroy (no deletion protection, buckets emptied)."""
    return Team(
        name=TEAM,
        project=project,
        region=region,
        alerts=False,
        force_destroy=True,
        delete_protection=False,
        store=Valkey(
            deletion_protection=False,
            network=Network(subnet_range="10.96.0.0/24", connector_range="10.96.1.0/28"),
        ),
        jobs=[
            Job(
                name=JOB,
                schedule="0 0 1 1 *",
                source="report",
                timeout_seconds=60,
                attempt_deadline_seconds=60,
            )
        ],
    )


@pytest.fixture(scope="module")
def valkey_deployed(sandbox_place, tmp_path_factory):
    """The Valkey team's stack applied (its Terraform state), destroyed after."""
    from cdktf import App

    from stacks.team_stack import TeamStack
    from tests.sandbox.conftest import terraform_runner

    team = valkey_team(sandbox_place.project, sandbox_place.region)
    app = App(outdir=str(VALKEY_OUT))
    TeamStack(app, team, archive_dir=Path(tmp_path_factory.mktemp("valkey-archives")))
    app.synth()
    runner = terraform_runner(
        VALKEY_OUT / "stacks" / TEAM, tmp_path_factory.mktemp("valkey-terraform") / "work"
    )
    runner.init()
    yield team, runner.apply()
    runner.destroy()


def answers(session, team: Team, since: datetime) -> list[dict]:
    """The library's answer lines of the team's function since `since`."""
    return log_entries(
        session,
        team.project,
        f'resource.type="cloud_run_revision" AND resource.labels.service_name="{TEAM}-{JOB}" '
        f'AND jsonPayload.logger="runonce" AND jsonPayload.latency_ms:* AND timestamp>="{rfc3339(since)}"',
    )


@pytest.mark.sandbox(needs=(VALKEY_VARIABLE,))
def test_a_run_forced_twice_on_a_valkey_team_runs_once_and_leaves_firestore_untouched(
    valkey_deployed, session
):
    team, _ = valkey_deployed
    since = datetime.now(UTC) - CLOCK_MARGIN
    force_run(session, team.project, team.region, team.name, JOB)
    assert wait_for(lambda: answers(session, team, since), bool, within=ANSWERED_WITHIN), (
        "no answer to jobs.run"
    )
    force_run(session, team.project, team.region, team.name, JOB)
    found = wait_for(
        lambda: answers(session, team, since), lambda lines: len(lines) >= 2, within=ANSWERED_WITHIN
    )
    outcomes: dict[str, list[str]] = defaultdict(list)
    for entry in found:
        outcomes[entry["jsonPayload"]["run_key"]].append(entry["jsonPayload"]["outcome"])
    assert any(sorted(answered) == ["completed", "duplicate"] for answered in outcomes.values()), outcomes
    for key in outcomes:
        document = f"projects/{team.project}/databases/{team.database}/documents/{team.collection}/{key}"
        assert session.get(f"{FIRESTORE}/{document}", timeout=60).status_code == 404, (
            f"run {key} is in Firestore: the function did not use RUNONCE_STORE"
        )


def test_the_valkey_sandbox_team_is_valid():
    from stacks.validate import find_problems

    team = valkey_team("acme-sandbox-1", "europe-west1")
    assert find_problems([team]) == []
    assert find_problems([replace(team, region="europe-north2")]) != []
