"""A crash after the target was started and before the completion was written: the next attempt
takes over the expired lease, finds the execution or build by the run key, and records it."""

from __future__ import annotations

import pytest

from runonce.targets import BuildTrigger, CloudRunJob, Workflow

from .conftest import JOB, TRIGGER, WORKFLOW, first_attempt_dies_after_the_call, scheduler_headers


@pytest.mark.parametrize(
    ("target", "kind"),
    [(Workflow(WORKFLOW), "executions"), (BuildTrigger(TRIGGER), "builds")],
    ids=["workflow execution by label", "build by substitution"],
)
def test_a_takeover_records_what_the_crashed_attempt_started_instead_of_starting_again(
    proxy_app, stand_in, clock, ledger, target, kind
):
    client = proxy_app(target).test_client()
    with first_attempt_dies_after_the_call(proxy_app, target):
        [started] = stand_in.resources(kind)
        held = client.post("/", headers=scheduler_headers())
        assert held.status_code == 409  # the dead attempt's lease is still live
        clock.advance(121)
        response = client.post("/", headers=scheduler_headers())

    assert response.status_code == 200 and response.json["outcome"] == "completed"
    assert response.json["attempt"] == 2
    assert response.json["result"]["reconciled"] is True
    assert started["name"] in response.json["result"].values()
    assert len(stand_in.resources(kind)) == 1
    record = ledger.get(response.json["run_key"])
    assert record["status"] == "completed" and record["attempts"] == 2


def test_a_cloud_run_job_cannot_be_found_again_so_the_takeover_runs_it_again_with_the_same_token(
    proxy_app, stand_in, clock
):
    """No per-execution label exists for job runs: the downstream token is the only protection."""
    with first_attempt_dies_after_the_call(proxy_app, CloudRunJob(JOB)):
        clock.advance(121)
        response = proxy_app(CloudRunJob(JOB)).test_client().post("/", headers=scheduler_headers())
    assert response.json["outcome"] == "completed" and response.json["result"]["reconciled"] is False
    first, second = (run.body["overrides"]["containerOverrides"][0]["env"] for run in stand_in.starts())
    assert first == second == [{"name": "RUNONCE_IDEMPOTENCY_KEY", "value": response.json["run_key"]}]
