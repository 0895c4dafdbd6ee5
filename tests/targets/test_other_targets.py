"""Cloud Run job runs, Cloud Build trigger runs and generic googleapis calls through the proxy:
the request shape, where the run key travels, and what is recorded as the run's result."""

from __future__ import annotations

from emulator.googleapis import Fault
from runonce.targets import ENV_NAME, IDEMPOTENCY_HEADER, SUBSTITUTION, BuildTrigger, CloudRunJob, GoogleApi

from .conftest import JOB, TRIGGER, scheduler_headers


def test_a_cloud_run_job_runs_once_with_the_run_key_in_every_container_env(proxy_app, stand_in):
    overrides = {
        "containerOverrides": [
            {"name": "export", "env": [{"name": "MODE", "value": "full"}]},
            {"name": "sidecar"},
        ],
        "taskCount": 2,
    }
    client = proxy_app(CloudRunJob(JOB, overrides)).test_client()
    response = client.post("/", headers=scheduler_headers())
    key = response.json["run_key"]
    [run] = stand_in.starts()
    assert run.path == f"/v2/{JOB}:run"
    assert run.body["overrides"]["taskCount"] == 2
    export, sidecar = run.body["overrides"]["containerOverrides"]
    assert export["env"] == [{"name": "MODE", "value": "full"}, {"name": ENV_NAME, "value": key}]
    assert sidecar == {"name": "sidecar", "env": [{"name": ENV_NAME, "value": key}]}
    [operation] = stand_in.resources("operations")
    [execution] = stand_in.resources("executions")
    assert response.json["result"] == {
        "target": "cloud_run_job",
        "operation": operation["name"],
        "execution": execution["name"],
        "reconciled": False,
    }
    assert client.post("/", headers=scheduler_headers()).json["result"] == response.json["result"]
    assert len(stand_in.starts()) == 1


def test_a_build_trigger_runs_once_with_the_run_key_as_a_substitution(proxy_app, stand_in):
    target = BuildTrigger(TRIGGER, {"_ENV": "prod"}, {"branchName": "main"})
    client = proxy_app(target).test_client()
    response = client.post("/", headers=scheduler_headers())
    key = response.json["run_key"]
    lookup, run = stand_in.calls
    assert lookup.query["filter"] == 'trigger_id="nightly-build"'
    assert run.path == f"/v1/{TRIGGER}:run"
    assert run.body == {
        "projectId": "acme-prod",
        "triggerId": "nightly-build",
        "source": {"branchName": "main", "substitutions": {"_ENV": "prod", SUBSTITUTION: key}},
    }
    [build] = stand_in.resources("builds")
    assert response.json["result"]["build"] == build["name"]
    assert client.post("/", headers=scheduler_headers()).json["outcome"] == "duplicate"
    assert len(stand_in.starts()) == 1


def test_a_build_whose_answer_was_lost_is_recognised_by_its_substitution(proxy_app, stand_in):
    client = proxy_app(BuildTrigger(TRIGGER)).test_client()
    other = proxy_app(BuildTrigger(TRIGGER)).test_client()
    other.post("/", headers=scheduler_headers(time="2026-11-29T02:00:00Z"))  # another run's build
    stand_in.inject(Fault("drop", path_contains=":run"))
    response = client.post("/", headers=scheduler_headers())
    assert response.json["outcome"] == "completed" and response.json["result"]["reconciled"] is True
    mine = [
        b
        for b in stand_in.resources("builds")
        if b["substitutions"][SUBSTITUTION] == response.json["run_key"]
    ]
    assert [response.json["result"]["build"]] == [build["name"] for build in mine]


def test_a_generic_googleapis_call_carries_the_run_key_as_a_header(proxy_app, stand_in):
    url = "https://pubsub.googleapis.com/v1/projects/acme-prod/topics/nightly:publish?alt=json"
    body = {"messages": [{"data": "aGk="}]}
    client = proxy_app(GoogleApi("POST", url, "roles/pubsub.publisher", body)).test_client()
    response = client.post("/", headers=scheduler_headers())
    [call] = stand_in.calls
    assert (call.method, call.path, call.body) == (
        "POST",
        "/v1/projects/acme-prod/topics/nightly:publish",
        body,
    )
    assert call.headers[IDEMPOTENCY_HEADER.lower()] == response.json["run_key"]
    assert response.json["result"]["target"] == "googleapis" and response.json["result"]["name"]
    client.post("/", headers=scheduler_headers())
    assert len(stand_in.calls) == 1
