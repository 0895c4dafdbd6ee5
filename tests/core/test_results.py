"""Defect class 1: results the store refuses. A finished job always ends `completed`, its result
kept faithfully (as JSON text) or marked not stored with the reason, and every later duplicate is
told exactly what the first answer said."""

from __future__ import annotations

import pytest

from runonce.core.store import MAX_RESULT_BYTES

from .conftest import key_of, scheduler_headers


def _nested(depth: int) -> dict:
    value: dict = {"leaf": 1}
    for _ in range(depth):
        value = {"level": value}
    return value


# Each of these is a value Firestore refuses as a document field (or its client cannot encode).
REFUSED_BY_FIRESTORE = {
    "nested arrays": {"rows": [["2026-11-30", 17], ["2026-12-01", 4]]},
    "integer keys": {1: "one", 2: "two"},
    "empty key": {"": "nameless"},
    "integer of 2^63": {"total": 2**63},
    "negative integer below -2^63": {"total": -(2**63) - 1},
    "key over 1500 bytes": {"k" * 1501: True},
    "reserved __x__ key": {"__name__": "reserved"},
    "nesting deeper than 20": _nested(25),
    "lone surrogate": {"text": "broken \ud800 unicode"},
    "lone surrogate in a key": {"\udcff": 1},
}


@pytest.mark.parametrize("result", REFUSED_BY_FIRESTORE.values(), ids=REFUSED_BY_FIRESTORE.keys())
@pytest.mark.both_stores
def test_a_result_firestore_refuses_is_stored_as_json_and_the_run_ends_completed(
    client, probe, clock, records, result
):
    probe.behaviour = lambda request: result
    first = client.post("/", headers=scheduler_headers())
    assert first.status_code == 200, first.data[:300]
    assert first.json["outcome"] == "completed" and first.json["recorded"] is True
    [record] = records()
    assert record["status"] == "completed"
    assert record["result_stored"] is True
    clock.advance(121)  # past the lease: a run left in_progress would be taken over and run again
    again = client.post("/", headers=scheduler_headers())
    assert again.json["outcome"] == "duplicate"
    assert again.json["result"] == first.json["result"]
    assert probe.count == 1


@pytest.mark.both_stores
def test_what_the_first_answer_says_is_what_json_keeps_and_what_duplicates_are_told(client, probe):
    probe.behaviour = lambda request: {1: ("a", "b"), "nested": [[1, 2]]}
    first = client.post("/", headers=scheduler_headers())
    assert first.json["result"] == {"1": ["a", "b"], "nested": [[1, 2]]}
    again = client.post("/", headers=scheduler_headers())
    assert again.json["result"] == first.json["result"]


@pytest.mark.parametrize(
    "result, reason",
    [
        (object(), "not JSON"),
        ({"when": float("nan")}, "not JSON"),
        ("x" * (MAX_RESULT_BYTES + 1), "more than the"),
    ],
    ids=["not JSON-serializable", "NaN", "too big"],
)
@pytest.mark.both_stores
def test_a_result_that_cannot_be_kept_is_marked_not_stored_and_the_run_still_completes(
    client, probe, records, result, reason
):
    probe.behaviour = lambda request: result
    first = client.post("/", headers=scheduler_headers())
    assert first.status_code == 200 and first.json["outcome"] == "completed"
    assert first.json["result"] is None and first.json["result_stored"] is False
    assert reason in first.json["result_dropped"]
    [record] = records()
    assert record["status"] == "completed" and record["result_stored"] is False
    assert record["result_dropped"] == first.json["result_dropped"]
    again = client.post("/", headers=scheduler_headers())
    assert again.json["result_stored"] is False
    assert again.json["result_dropped"] == first.json["result_dropped"]
    assert probe.count == 1


@pytest.mark.both_stores
def test_a_result_of_just_the_size_limit_is_kept(client, probe, records):
    text = "x" * (MAX_RESULT_BYTES - 2)  # plus its two quotes
    probe.behaviour = lambda request: text
    assert client.post("/", headers=scheduler_headers()).json["result"] == text
    assert records()[0]["result_stored"] is True


def test_a_record_written_before_results_were_json_text_is_still_told(client, probe, clock, ledger):
    claim = ledger.claim(key_of(clock), {"job": "nightly-report"})
    ledger._collection.document(claim.key).update({"status": "completed", "result": {"rows": 42}})
    again = client.post("/", headers=scheduler_headers())
    assert again.json["outcome"] == "duplicate" and again.json["result"] == {"rows": 42}
    assert probe.count == 0
