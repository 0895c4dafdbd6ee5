"""A decorated function switches to the Valkey store by configuration alone: `RUNONCE_STORE`
holding the server's URL. The same job code runs once per run on it, and a store setting or a
server runonce cannot use is answered `misconfigured` with nothing run, until it is fixed."""

from __future__ import annotations

import uuid
from datetime import timedelta

import flask
import pytest

import runonce
from tests.core.conftest import Probe, scheduler_headers
from tests.store.valkey_server import ValkeyServer


def _app(probe: Probe, collection: str) -> flask.Flask:
    handler = runonce.deduplicated(collection=collection, lease=120)(probe)
    app = flask.Flask(f"runonce-valkey-{uuid.uuid4().hex[:6]}")
    app.add_url_rule("/", "handle", lambda: handler(flask.request._get_current_object()), methods=["POST"])
    return app


@pytest.fixture
def collection() -> str:
    return f"choice_{uuid.uuid4().hex[:12]}"


def test_runonce_store_naming_a_valkey_server_serves_the_job_there_once_per_run(
    valkey_server, monkeypatch, clock, collection
):
    from runonce.store.valkey import connect

    url = f"valkey://127.0.0.1:{valkey_server.port}"
    monkeypatch.setenv("RUNONCE_STORE", url)
    probe = Probe()
    client = _app(probe, collection).test_client()
    first = client.post("/", headers=scheduler_headers())
    again = client.post("/", headers=scheduler_headers())
    assert (first.status_code, first.json["outcome"]) == (200, "completed")
    assert (again.status_code, again.json["outcome"], again.json["status"]) == (200, "duplicate", "completed")
    assert probe.count == 1
    store = connect(url, collection, timedelta(seconds=120), timedelta(days=7))
    [record] = store.find({"job": "nightly-report"}).values()
    assert (record["status"], record["schedule_time"]) == ("completed", "2026-11-29T03:00:00Z")


def test_an_event_function_runs_each_event_once_on_the_valkey_server_runonce_store_names(
    valkey_server, monkeypatch, collection
):
    from tests.events.conftest import EventProbe, envelope, post, serve_app

    monkeypatch.setenv("RUNONCE_STORE", f"valkey://127.0.0.1:{valkey_server.port}")
    monkeypatch.setenv("PUBSUB_EMULATOR_HOST", "127.0.0.1:9")  # a publisher client is built, never used
    probe = EventProbe()
    topic = "projects/runonce-local/topics/orders-dead-letters"
    handler = runonce.deduplicated_event(collection=collection, dead_letter_topic=topic)(probe)
    client = serve_app(handler).test_client()
    first = post(client, envelope(message_id="order-7"))
    again = post(client, envelope(message_id="order-7"))
    other = post(client, envelope(message_id="order-8"))
    assert [answer.json["outcome"] for answer in (first, again, other)] == [
        "completed",
        "duplicate",
        "completed",
    ]
    assert [event.id for event in probe.events] == ["order-7", "order-8"]


def test_a_store_setting_that_names_no_store_is_answered_misconfigured(monkeypatch, clock, collection):
    monkeypatch.setenv("RUNONCE_STORE", "redis://runner:s3cret@127.0.0.1:6379")
    probe = Probe()
    answer = _app(probe, collection).test_client().post("/", headers=scheduler_headers())
    assert answer.json["outcome"] == "misconfigured" and probe.count == 0
    assert "RUNONCE_STORE='redis://runner:***@127.0.0.1:6379' names no run store" in answer.json["error"]


def test_a_server_that_may_evict_is_answered_misconfigured_until_it_is_fixed(
    valkey_server, monkeypatch, clock, collection
):
    import valkey

    server = ValkeyServer("--maxmemory-policy", "volatile-lru")
    try:
        monkeypatch.setenv("RUNONCE_STORE", f"valkey://127.0.0.1:{server.port}")
        probe = Probe()
        client = _app(probe, collection).test_client()
        refused = client.post("/", headers=scheduler_headers())
        assert refused.json["outcome"] == "misconfigured" and probe.count == 0
        assert "maxmemory-policy is 'volatile-lru'" in refused.json["error"]
        admin = valkey.Valkey(port=server.port, decode_responses=True)
        admin.config_set("maxmemory-policy", "noeviction")
        admin.close()
        served = client.post("/", headers=scheduler_headers())
        assert served.json["outcome"] == "completed" and probe.count == 1
    finally:
        server.stop()


@pytest.mark.fast
@pytest.mark.parametrize(
    ("environ", "store"),
    [
        ({}, "firestore"),
        ({"RUNONCE_STORE": " Firestore "}, "firestore"),
        ({"RUNONCE_STORE": "valkey://127.0.0.1:6379?replicas=1"}, "valkey://127.0.0.1:6379?replicas=1"),
        ({"RUNONCE_STORE": "valkeys://127.0.0.1:6378"}, "valkeys://127.0.0.1:6378"),
    ],
)
def test_the_store_setting_is_firestore_unless_it_names_a_valkey_url(environ, store):
    from runonce.core.settings import load_settings

    assert load_settings({}, environ).store == store
