"""A start committed after the proxy gave up on it (the API slower than the proxy's timeout):
the run is held for the grace instead of released, so no retry looks before the late start is
visible and starts a second one; the attempt after the grace finds it."""

from __future__ import annotations

import json
import time
from datetime import timedelta

import grpc
import pytest

from emulator import wire
from emulator.googleapis import Fault
from runonce import ConfigError, OutcomeUnknown
from runonce.targets import BuildTrigger, CloudRunJob, GoogleApi, Workflow
from runonce.targets.proxy import Proxy

from .conftest import JOB, TRIGGER, WORKFLOW, FakeCredentials, scheduler_headers, serve

TIMEOUT = 0.5
PUBLISH = "https://pubsub.googleapis.com/v1/projects/acme-prod/topics/nightly:publish"
GRACE = TIMEOUT + 60  # the default: the call timeout plus 60 s


def _wait_for(condition, seconds: float = 5.0) -> None:
    deadline = time.monotonic() + seconds
    while not condition() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert condition()


@pytest.mark.parametrize(
    ("target", "path", "kind"),
    [(Workflow(WORKFLOW), "/executions", "executions"), (BuildTrigger(TRIGGER), ":run", "builds")],
    ids=["workflow", "build trigger"],
)
def test_a_start_that_commits_after_the_timeout_is_held_then_found_not_started_twice(
    proxy_app, stand_in, clock, ledger, target, path, kind
):
    client = proxy_app(target, timeout=TIMEOUT).test_client()
    stand_in.inject(Fault("hang", path_contains=path, seconds=1.5, commit=True))
    first = client.post("/", headers=scheduler_headers())
    assert first.status_code == 409 and first.json["outcome"] == "in_progress", first.json
    assert first.json["held_seconds"] == GRACE

    record = ledger.get(first.json["run_key"])
    assert record["status"] == "in_progress" and "outcome is unknown" in record["held_reason"]
    assert record["lease_expires"] == record["held_at"] + timedelta(seconds=GRACE)

    # Scheduler's retry comes while the late start is still in flight and not yet listed.
    assert stand_in.resources(kind) == []
    retry = client.post("/", headers=scheduler_headers())
    assert retry.status_code == 409 and retry.json["outcome"] == "in_progress"
    _wait_for(lambda: len(stand_in.resources(kind)) == 1)

    clock.advance(GRACE - 1)
    assert client.post("/", headers=scheduler_headers()).status_code == 409  # still within the grace
    clock.advance(2)
    after = client.post("/", headers=scheduler_headers())
    [started] = stand_in.resources(kind)
    assert after.json["outcome"] == "completed" and after.json["attempt"] == 2
    assert after.json["result"]["reconciled"] is True and started["name"] in after.json["result"].values()
    time.sleep(0.2)
    assert len(stand_in.resources(kind)) == 1


def test_a_cloud_run_job_is_not_run_again_within_the_grace(proxy_app, stand_in, clock):
    """No lookup exists for job executions: past the grace it runs again, with the same token."""
    client = proxy_app(CloudRunJob(JOB), timeout=TIMEOUT).test_client()
    stand_in.inject(Fault("hang", path_contains=":run", seconds=1.0, commit=True))
    assert client.post("/", headers=scheduler_headers()).status_code == 409
    assert client.post("/", headers=scheduler_headers()).status_code == 409
    _wait_for(lambda: len(stand_in.resources("executions")) == 1)
    assert len(stand_in.starts()) == 1
    clock.advance(GRACE + 1)
    again = client.post("/", headers=scheduler_headers())
    assert again.json["outcome"] == "completed" and again.json["attempt"] == 2
    first, second = (run.body["overrides"]["containerOverrides"][0]["env"] for run in stand_in.starts())
    assert first == second


def test_a_lookup_that_cannot_be_read_after_a_takeover_holds_the_run_instead_of_starting(
    proxy_app, stand_in, clock
):
    """A list answered 200 with HTML says nothing about what was started: it is not "none"."""
    client = proxy_app(Workflow(WORKFLOW), timeout=TIMEOUT).test_client()
    stand_in.inject(Fault("hang", path_contains="/executions", seconds=1.0, commit=True))
    client.post("/", headers=scheduler_headers())
    _wait_for(lambda: len(stand_in.resources("executions")) == 1)
    clock.advance(GRACE + 1)
    html = Fault("answer", method="GET", path_contains="/executions", status=200, body="<html></html>")
    stand_in.inject(html)
    held = client.post("/", headers=scheduler_headers())
    assert held.status_code == 409 and held.json["outcome"] == "in_progress", held.json
    assert len(stand_in.resources("executions")) == 1
    clock.advance(GRACE + 1)
    done = client.post("/", headers=scheduler_headers())
    assert done.json["outcome"] == "completed" and done.json["result"]["reconciled"] is True
    assert len(stand_in.resources("executions")) == 1


def test_a_hold_the_store_refuses_leaves_the_claim_held_by_its_lease_never_released(
    stand_in, clock, ledger, collection, tap, tapped_client
):
    proxy = Proxy(Workflow(WORKFLOW), credentials=FakeCredentials(), base_url=stand_in.url, timeout=TIMEOUT)

    def body(request):
        tap.inject(wire.Fault("Commit", grpc.StatusCode.PERMISSION_DENIED))  # the hold's write
        return proxy(request)

    client = serve(body, collection, tapped_client).test_client()
    stand_in.inject(Fault("hang", path_contains="/executions", seconds=1.0, commit=False))
    first = client.post("/", headers=scheduler_headers())
    assert first.status_code == 409 and first.json["outcome"] == "in_progress", first.json
    record = ledger.get(first.json["run_key"])
    assert record["status"] == "in_progress" and "held_at" not in record
    assert record["lease_expires"] == record["claimed_at"] + timedelta(seconds=120)
    clock.advance(GRACE + 1)  # past the grace, within the lease: still held
    assert client.post("/", headers=scheduler_headers()).status_code == 409
    clock.advance(120)
    after = client.post("/", headers=scheduler_headers())
    assert after.json["outcome"] == "completed" and after.json["attempt"] == 2
    assert len(stand_in.resources("executions")) == 1


def test_the_grace_is_read_from_the_environment(stand_in, clock):
    environ = {
        "RUNONCE_TARGET": json.dumps({"kind": "workflow", "workflow": WORKFLOW}),
        "RUNONCE_TARGET_BASE_URL": stand_in.url,
        "RUNONCE_TARGET_TIMEOUT_SECONDS": str(TIMEOUT),
        "RUNONCE_TARGET_GRACE_SECONDS": "240",
    }
    stand_in.inject(Fault("hang", path_contains="/executions", seconds=1.0, commit=False))
    with pytest.raises(OutcomeUnknown) as raised:
        Proxy(credentials=FakeCredentials(), environ=environ).start("ab" * 32)
    assert raised.value.hold_seconds == 240


@pytest.mark.parametrize("raw", ["soon", "0", "-5"])
def test_a_grace_that_is_not_a_positive_number_is_a_config_error(stand_in, raw):
    environ = {
        "RUNONCE_TARGET": json.dumps({"kind": "workflow", "workflow": WORKFLOW}),
        "RUNONCE_TARGET_GRACE_SECONDS": raw,
    }
    with pytest.raises(ConfigError, match="RUNONCE_TARGET_GRACE_SECONDS"):
        Proxy(environ=environ).start("ab" * 32)
    assert stand_in.calls == []


@pytest.mark.parametrize(
    ("target", "path"),
    [(CloudRunJob(JOB), ":run"), (GoogleApi("POST", PUBLISH, body={"messages": []}), ":publish")],
    ids=["cloud run job", "generic call"],
)
def test_a_2xx_whose_body_trickles_past_the_timeout_completes_the_run_without_a_second_start(
    proxy_app, stand_in, target, path
):
    """The status said started; waiting for the body until the instance is killed would leave a
    takeover that runs a target without a lookup again."""
    client = proxy_app(target, timeout=TIMEOUT).test_client()
    stand_in.inject(Fault("drip", path_contains=path, seconds=0.1))
    began = time.monotonic()
    first = client.post("/", headers=scheduler_headers())
    assert time.monotonic() - began < 8 * TIMEOUT  # not the 5 to 50 s the whole body takes
    assert first.status_code == 200 and first.json["outcome"] == "completed", first.json
    assert "timeout" in first.json["result"]["answer_unreadable"]
    assert client.post("/", headers=scheduler_headers()).json["outcome"] == "duplicate"
    assert len(stand_in.starts()) == 1
