"""The run key travels from Scheduler through the proxy and the started target to the last
state-changing step (functions/downstream_example), which runs once per run however often it is
reached: duplicate deliveries, a workflow retrying its call, a job started twice after a crash."""

from __future__ import annotations

import importlib.util
import json
import threading
import uuid
from pathlib import Path

import flask
import pytest
import requests
from werkzeug.serving import make_server

from runonce.targets import ARGUMENT_FIELD, ENV_NAME, IDEMPOTENCY_HEADER, CloudRunJob, Workflow

from .conftest import JOB, WORKFLOW, first_attempt_dies_after_the_call, scheduler_headers

EXAMPLE = Path(__file__).resolve().parents[2] / "functions" / "downstream_example" / "main.py"
ORDER = {"order": "A-17", "amount": 42}


@pytest.fixture
def downstream(firestore_client, clock, monkeypatch):
    """The example service on a real loopback server, with collections of its own; yields (url, effects)."""
    effects = f"effects_{uuid.uuid4().hex[:8]}"
    monkeypatch.setenv("DOWNSTREAM_EFFECTS_COLLECTION", effects)
    monkeypatch.setenv("RUNONCE_DOWNSTREAM_COLLECTION", f"steps_{uuid.uuid4().hex[:8]}")
    spec = importlib.util.spec_from_file_location(f"downstream_example_{uuid.uuid4().hex[:6]}", EXAMPLE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    app = flask.Flask(f"downstream-example-{uuid.uuid4().hex[:6]}")
    app.add_url_rule("/", "handle", lambda: module.handle(flask.request), methods=["POST"])
    server = make_server("127.0.0.1", 0, app, threaded=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield (
        f"http://127.0.0.1:{server.server_port}/",
        lambda: [snapshot.to_dict() for snapshot in firestore_client.collection(effects).stream()],
    )
    server.shutdown()


def test_the_workflow_argument_carries_the_token_to_the_step_which_runs_once(proxy_app, stand_in, downstream):
    url, effects = downstream
    answers = []

    def play_workflow(execution):
        """What workflow.yaml does, called twice as a workflow retrying its http.post would."""
        args = json.loads(execution["argument"])
        for _ in range(2):
            answers.append(
                requests.post(
                    args["charge_url"],
                    json=args["order"],
                    headers={IDEMPOTENCY_HEADER: args[ARGUMENT_FIELD]},
                    timeout=30,
                )
            )

    stand_in.on_start = play_workflow
    client = proxy_app(Workflow(WORKFLOW, {"charge_url": url, "order": ORDER}), timeout=30).test_client()
    responses = [client.post("/", headers=scheduler_headers()) for _ in range(3)]
    key = responses[0].json["run_key"]

    assert [r.json["outcome"] for r in responses] == ["completed", "duplicate", "duplicate"]
    assert len(stand_in.resources("executions")) == 1
    assert [a.status_code for a in answers] == [200, 200]
    assert answers[0].json() == answers[1].json() and answers[1].headers["X-Runonce-Replayed"] == "true"
    assert sorted((e["kind"], e["token"], e["order"]["order"]) for e in effects()) == [
        ("charge", key, "A-17"),
        ("receipt", key, "A-17"),
    ]


def test_a_job_started_twice_after_a_crash_still_charges_once(proxy_app, stand_in, downstream, clock):
    url, effects = downstream

    def play_job(execution):
        """The job's container: reads the token from its env and calls the service with it."""
        [container] = execution["overrides"]["containerOverrides"]
        token = {item["name"]: item["value"] for item in container["env"]}[ENV_NAME]
        requests.post(url, json=ORDER, headers={IDEMPOTENCY_HEADER: token}, timeout=30)

    stand_in.on_start = play_job
    with first_attempt_dies_after_the_call(proxy_app, CloudRunJob(JOB)):
        clock.advance(121)
        response = (
            proxy_app(CloudRunJob(JOB), timeout=30).test_client().post("/", headers=scheduler_headers())
        )

    assert response.json["outcome"] == "completed"
    assert len(stand_in.resources("executions")) == 2  # no handle to find the first job run
    assert sorted(e["kind"] for e in effects()) == ["charge", "receipt"]
