"""The composite indexes `runonce runs` lists an event job's records with (docs/operate.md), in
the synthesized stacks: one (field, claimed_at) index per kind of event job the team has, on the
ledger's database and collection (test_constructs checks that it waits for the Firestore API);
none for a team without event jobs."""

from __future__ import annotations

from pathlib import Path

import pytest

from stacks.team import load_team_file
from tests.stacks.conftest import synthesize
from tests.stacks.test_constructs import ref

EVERY_FEATURE = Path(__file__).parent / "fixtures" / "every_feature.py"


def _index(field: str) -> list[dict]:
    return [
        {"field_path": field, "order": "ASCENDING"},
        {"field_path": "claimed_at", "order": "ASCENDING"},
    ]


def test_a_team_with_push_event_jobs_gets_the_event_source_index_on_its_ledger(example):
    [index] = example.resources("google_firestore_index").values()
    database = ref(example, "google_firestore_database", "name", name="runonce")
    assert (index["project"], index["database"], index["collection"]) == (
        "runonce-example",
        database,
        "scheduler_runs",
    )
    assert (index["query_scope"], index["fields"]) == ("COLLECTION", _index("event_source"))


def test_a_team_without_event_jobs_gets_no_index(payments):
    assert payments.resources("google_firestore_index") == {}


@pytest.fixture(scope="module")
def every(archive_dir):
    return synthesize(load_team_file(EVERY_FEATURE), archive_dir)


def test_a_team_with_push_and_eventarc_jobs_gets_both_indexes(every):
    fields = sorted(
        index["fields"][0]["field_path"] for index in every.resources("google_firestore_index").values()
    )
    assert fields == ["event_consumer", "event_source"]
    assert all(
        index["fields"][1] == _index("x")[1] for index in every.resources("google_firestore_index").values()
    )
