"""The operators' read of the watchdog's pause records (stacks/constructs/operators.py): `runonce
runs` and `show` read the watchdog's own record of a pause (operate/paused.py), which on a Firestore
team is in the watchdog's database, not the ledger. Each operator of a team whose watchdog may pause
a job gets `roles/datastore.viewer` conditioned on that database alone; no other team's operators
do, and a Valkey team's need nothing more (the records are on the instance their connection role
already reaches)."""

from __future__ import annotations

import copy
import re
from dataclasses import replace

import pytest
from cdktf import Testing as CdktfTesting

from stacks import naming
from stacks.config import defaults
from stacks.constructs.valkey_store import CONNECTION_ROLE
from stacks.team import TEAMS_DIR, load_team_file
from tests.stacks.conftest import Synthesized, synthesize
from tests.stacks.test_pause import OPERATORS, PAUSING
from tests.stacks.test_policy import flagged

# The shape every database condition of the stacks has (`DedupStore.only_this`).
ONE_DATABASE = re.compile(r'^resource\.name == "projects/([^/"]+)/databases/([^/"]+)"$')


@pytest.fixture(scope="module")
def pausing(archive_dir) -> Synthesized:
    return synthesize(PAUSING, archive_dir)


def viewer_grants(synth: Synthesized) -> dict[str, dict]:
    """Every `roles/datastore.viewer` grant to an operator, by logical id."""
    return {
        address: grant
        for address, grant in synth.resources("google_project_iam_member").items()
        if grant["role"] == defaults.ROLE_LEDGER_READER and grant["member"] in OPERATORS
    }


def test_each_operator_of_a_team_that_may_pause_reads_the_watchdogs_database_alone(pausing):
    database = naming.watchdog_database(PAUSING.database)
    expression = f'resource.name == "projects/{PAUSING.project}/databases/{database}"'
    grants = viewer_grants(pausing)
    assert sorted(grant["member"] for grant in grants.values()) == sorted(OPERATORS)
    assert {grant["condition"]["expression"] for grant in grants.values()} == {expression}
    assert {grant["project"] for grant in grants.values()} == {PAUSING.project}
    # The database the condition names is the one the watchdog's construct creates and its
    # function is told (RUNONCE_DATABASE), not a name rebuilt apart from them.
    (created,) = [
        found["name"]
        for address, found in pausing.resources("google_firestore_database").items()
        if address.startswith("watchdog")
    ]
    assert created == database == pausing.stack.watchdog.environment()["RUNONCE_DATABASE"]
    for operator in OPERATORS:
        assert CdktfTesting.to_have_resource_with_properties(
            pausing.json,
            "google_project_iam_member",
            {
                "project": PAUSING.project,
                "role": defaults.ROLE_LEDGER_READER,
                "member": operator,
                "condition": {"expression": expression},
            },
        )


def test_the_condition_has_the_shape_of_the_ledgers_and_a_title_and_description_of_its_own(pausing):
    (ledger,) = {
        grant["condition"]["expression"]
        for grant in pausing.resources("google_project_iam_member").values()
        if grant["member"] == OPERATORS[0] and grant["role"] == defaults.ROLE_LEDGER
    }
    grants = viewer_grants(pausing)
    assert len(grants) == len(OPERATORS)
    for grant in grants.values():
        condition = grant["condition"]
        shape, ledger_shape = ONE_DATABASE.match(condition["expression"]), ONE_DATABASE.match(ledger)
        assert shape is not None and ledger_shape is not None
        assert shape.group(1) == ledger_shape.group(1) == PAUSING.project
        assert shape.group(2) == f"{ledger_shape.group(2)}-{naming.WATCHDOG}"
        # A condition needs an expression and a title (`gcloud iam policies lint-condition`); the
        # stacks' titles are lower case words joined by hyphens, one per purpose.
        assert re.fullmatch(r"[a-z]+(-[a-z]+)+", condition["title"])
        assert condition["title"] not in {"runonce-operator-ledger", "runonce-ledger-read-only"}
        assert naming.watchdog_database(PAUSING.database) in condition["description"]


def test_the_grant_waits_for_the_firestore_api_as_the_ledger_grant_does(pausing):
    grants = viewer_grants(pausing)
    assert len(grants) == len(OPERATORS)
    for grant in grants.values():
        assert any("google_project_service" in dependency for dependency in grant["depends_on"])


def test_operators_of_a_team_whose_jobs_are_never_paused_cannot_read_the_watchdogs_database(archive_dir):
    never = replace(PAUSING, jobs=[replace(PAUSING.jobs[0], pause_after_failures=0)])
    synth = synthesize(never, archive_dir)
    assert viewer_grants(synth) == {}
    assert not CdktfTesting.to_have_resource_with_properties(
        synth.json, "google_project_iam_member", {"role": defaults.ROLE_LEDGER_READER, "member": OPERATORS[0]}
    )


def test_the_example_team_pauses_nothing_and_grants_no_operator_a_watchdog_read(example):
    assert not any(job.pause_after_failures for job in example.team.scheduled_views)
    assert viewer_grants(example) == {}


VALKEY_PAUSING = replace(
    load_team_file(TEAMS_DIR / "ledger.py"),
    jobs=[replace(load_team_file(TEAMS_DIR / "ledger.py").jobs[0], pause_after_failures=3)],
    operators=OPERATORS,
)


@pytest.fixture(scope="module")
def valkey_pausing(archive_dir) -> Synthesized:
    return synthesize(VALKEY_PAUSING, archive_dir)


def test_on_valkey_the_operators_read_the_pause_records_through_their_connection_role_only(valkey_pausing):
    assert valkey_pausing.stack.watchdog is not None and valkey_pausing.stack.watchdog.props.pauses
    assert viewer_grants(valkey_pausing) == {}
    instance = valkey_pausing.stack.valkey.resource_name
    connections = {
        grant["member"]: grant["condition"]["expression"]
        for grant in valkey_pausing.resources("google_project_iam_member").values()
        if grant["role"] == CONNECTION_ROLE and grant["member"] in OPERATORS
    }
    assert connections == dict.fromkeys(OPERATORS, f'resource.name == "{instance}"')


def test_the_whole_pack_passes_a_valkey_team_that_pauses(valkey_pausing):
    assert flagged(valkey_pausing.document) == set()


def test_on_valkey_a_viewer_grant_on_the_watchdogs_database_is_flagged(valkey_pausing):
    document = copy.deepcopy(valkey_pausing.document)
    grants = document["resource"]["google_project_iam_member"]
    database = naming.watchdog_database(VALKEY_PAUSING.database)
    grants["extra-watchdog-read"] = {
        "project": VALKEY_PAUSING.project,
        "role": defaults.ROLE_LEDGER_READER,
        "member": OPERATORS[0],
        "condition": {
            "title": "runonce-operator-watchdog-read",
            "expression": f'resource.name == "projects/{VALKEY_PAUSING.project}/databases/{database}"',
        },
    }
    assert flagged(document) == {("RO-OPS-1", "google_project_iam_member.extra-watchdog-read")}
