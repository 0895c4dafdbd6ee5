"""The proxy in front of a Workflows target, on the real Firestore emulator and the API stand-in:
one execution per run whatever Scheduler delivers, the run key in its argument and label."""

from __future__ import annotations

import json

import pytest

from emulator.googleapis import Fault
from runonce.core.store import StoredResult
from runonce.targets import ARGUMENT_FIELD, LABEL_KEY, Workflow

from .conftest import FAKE_TOKEN, WORKFLOW, scheduler_headers


def _creates(stand_in) -> list:
    return [call for call in stand_in.starts() if call.path.endswith("/executions")]


def test_a_delivery_starts_one_execution_with_the_run_key_in_argument_and_label(proxy_app, stand_in, ledger):
    client = proxy_app(Workflow(WORKFLOW, {"region": "emea"})).test_client()
    response = client.post("/", headers=scheduler_headers())
    assert response.status_code == 200 and response.json["outcome"] == "completed"
    key = response.json["run_key"]
    [create] = _creates(stand_in)
    assert create.path == f"/v1/{WORKFLOW}/executions"
    assert json.loads(create.body["argument"]) == {"region": "emea", ARGUMENT_FIELD: key}
    assert create.body["labels"] == {LABEL_KEY: key[:63]}
    assert create.headers["authorization"] == f"Bearer {FAKE_TOKEN}"
    [execution] = stand_in.resources("executions")
    assert response.json["result"] == {
        "target": "workflow",
        "execution": execution["name"],
        "reconciled": False,
    }
    assert StoredResult.from_record(ledger.get(key)).value["execution"] == execution["name"]


def test_the_proxy_looks_for_an_earlier_execution_before_starting_one(proxy_app, stand_in):
    client = proxy_app(Workflow(WORKFLOW)).test_client()
    key = client.post("/", headers=scheduler_headers()).json["run_key"]
    lookup, create = stand_in.calls
    assert (lookup.method, lookup.path) == ("GET", f"/v1/{WORKFLOW}/executions")
    assert lookup.query["filter"] == f'labels.{LABEL_KEY}="{key[:63]}"'
    assert create.method == "POST"


def test_duplicate_deliveries_are_answered_with_the_recorded_execution_without_calling_the_api(
    proxy_app, stand_in
):
    client = proxy_app(Workflow(WORKFLOW)).test_client()
    first = client.post("/", headers=scheduler_headers())
    calls = len(stand_in.calls)
    again = [client.post("/", headers=scheduler_headers()) for _ in range(3)]
    assert {r.json["outcome"] for r in again} == {"duplicate"}
    assert all(r.json["result"] == first.json["result"] for r in again)
    assert len(stand_in.calls) == calls
    assert len(stand_in.resources("executions")) == 1


def test_each_scheduled_run_gets_its_own_execution(proxy_app, stand_in):
    client = proxy_app(Workflow(WORKFLOW)).test_client()
    client.post("/", headers=scheduler_headers(time="2026-11-29T03:00:00Z"))
    client.post("/", headers=scheduler_headers(time="2026-11-29T02:00:00Z"))
    assert len(stand_in.resources("executions")) == 2


def test_an_answer_dropped_after_commit_is_found_by_its_label_in_the_same_attempt(proxy_app, stand_in):
    client = proxy_app(Workflow(WORKFLOW)).test_client()
    stand_in.inject(Fault("drop", path_contains="/executions"))
    response = client.post("/", headers=scheduler_headers())
    [execution] = stand_in.resources("executions")
    assert response.status_code == 200 and response.json["outcome"] == "completed"
    assert response.json["result"] == {
        "target": "workflow",
        "execution": execution["name"],
        "reconciled": True,
    }
    assert client.post("/", headers=scheduler_headers()).json["outcome"] == "duplicate"
    assert len(_creates(stand_in)) == 1


def test_a_call_that_timed_out_and_never_landed_is_held_then_starts_the_execution_once(
    proxy_app, stand_in, clock
):
    client = proxy_app(Workflow(WORKFLOW), timeout=0.5).test_client()
    stand_in.inject(Fault("hang", path_contains="/executions", seconds=1.0, commit=False))
    first = client.post("/", headers=scheduler_headers())
    assert first.status_code == 409 and first.json["outcome"] == "in_progress"
    assert stand_in.resources("executions") == []
    clock.advance(61)  # past the grace: the timeout plus 60 s
    second = client.post("/", headers=scheduler_headers())
    assert second.json["outcome"] == "completed" and second.json["result"]["reconciled"] is False
    assert len(stand_in.resources("executions")) == 1


@pytest.mark.parametrize("status", [403, 404, 400])
def test_a_permanent_target_error_is_recorded_once_and_not_retried(proxy_app, stand_in, ledger, status):
    client = proxy_app(Workflow(WORKFLOW)).test_client()
    stand_in.inject(Fault("fail", path_contains="/executions", status=status))
    first = client.post("/", headers=scheduler_headers())
    assert first.status_code == 200 and first.json["outcome"] == "failed"
    assert f"answered {status}" in first.json["error"]
    calls = len(stand_in.calls)
    again = client.post("/", headers=scheduler_headers())
    assert again.json["outcome"] == "duplicate" and again.json["status"] == "failed"
    assert len(stand_in.calls) == calls
    assert ledger.get(first.json["run_key"])["status"] == "failed"
    assert stand_in.resources("executions") == []


@pytest.mark.parametrize("status", [408, 429, 409])
def test_a_target_error_saying_not_done_is_answered_500_and_the_retry_starts_the_execution(
    proxy_app, stand_in, status
):
    client = proxy_app(Workflow(WORKFLOW)).test_client()
    stand_in.inject(Fault("fail", path_contains="/executions", status=status))
    first = client.post("/", headers=scheduler_headers())
    assert first.status_code == 500 and first.json["outcome"] == "retry"
    second = client.post("/", headers=scheduler_headers())
    assert second.status_code == 200 and second.json["outcome"] == "completed"
    assert len(stand_in.resources("executions")) == 1


def test_an_unreachable_target_is_retried(proxy_app, stand_in):
    app = proxy_app(Workflow(WORKFLOW))
    stand_in.stop()
    response = app.test_client().post("/", headers=scheduler_headers())
    assert response.status_code == 500 and response.json["outcome"] == "retry"
