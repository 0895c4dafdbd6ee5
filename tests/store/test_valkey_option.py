"""The decorators take the run store as an option, `store=`, as RUNONCE_STORE gives it: each of
the four (scheduled and event, Flask-style and ASGI) serves its job on the Valkey server the option
names, once per run; an option that contradicts RUNONCE_STORE, or a Firestore client given with a
Valkey store, is answered `misconfigured` with nothing run."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from datetime import timedelta

import flask
import pytest

import runonce
from runonce.events import asgi as events_asgi
from runonce.scheduler import asgi as scheduler_asgi
from tests.core.conftest import Probe, scheduler_headers
from tests.events.conftest import envelope

Post = Callable[[], tuple[int, dict]]


def _flask(handler: Callable, body: Callable[[], dict]) -> Post:
    app = flask.Flask(f"runonce-option-{uuid.uuid4().hex[:6]}")
    app.add_url_rule("/", "handle", lambda: handler(flask.request._get_current_object()), methods=["POST"])
    client = app.test_client()

    def post() -> tuple[int, dict]:
        answer = client.post("/", **body())
        return answer.status_code, answer.json

    return post


def _starlette(endpoint: Callable, body: Callable[[], dict]) -> Post:
    from starlette.applications import Starlette
    from starlette.routing import Route
    from starlette.testclient import TestClient

    client = TestClient(Starlette(routes=[Route("/", endpoint, methods=["POST"])]))

    def post() -> tuple[int, dict]:
        answer = client.post("/", **body())
        return answer.status_code, answer.json()

    return post


def _scheduled() -> dict:
    return {"headers": scheduler_headers()}


def _event() -> dict:
    return {"json": envelope(message_id="order-7")}


def _served(kind: str, probe: Probe, **options: object) -> Post:
    """`probe` as the job of decorator `kind`, with `options`."""
    topic = "projects/runonce-local/topics/orders-dead-letters"
    if kind == "scheduled":
        return _flask(runonce.deduplicated(**options)(probe), _scheduled)
    if kind == "scheduled-asgi":
        return _starlette(scheduler_asgi.deduplicated(**options)(probe), _scheduled)
    if kind == "event":
        handler = runonce.deduplicated_event(dead_letter_topic=topic, **options)(lambda event: probe(event))
        return _flask(handler, _event)
    endpoint = events_asgi.deduplicated_event(dead_letter_topic=topic, **options)(lambda event: probe(event))
    return _starlette(endpoint, _event)


KINDS = ["scheduled", "scheduled-asgi", "event", "event-asgi"]


@pytest.fixture
def collection(monkeypatch) -> str:
    monkeypatch.delenv("RUNONCE_STORE", raising=False)
    monkeypatch.setenv("PUBSUB_EMULATOR_HOST", "127.0.0.1:9")  # an event's publisher is built, never used
    return f"option_{uuid.uuid4().hex[:12]}"


@pytest.mark.parametrize("kind", KINDS)
def test_the_store_option_serves_the_job_on_the_valkey_server_it_names_once_per_run(
    kind, valkey_server, clock, collection
):
    from runonce.store.valkey import connect

    url = f"valkey://127.0.0.1:{valkey_server.port}"
    probe = Probe()
    post = _served(kind, probe, store=url, collection=collection, lease=120)
    first, again = post(), post()
    assert (first[0], first[1]["outcome"]) == (200, "completed"), first
    assert (again[0], again[1]["outcome"]) == (200, "duplicate"), again
    assert probe.count == 1
    store = connect(url, collection, timedelta(seconds=120), timedelta(days=7))
    # Every record but a scheduled run's completions entry (`Run.previous`), which has no status.
    [record] = [found for found in store.find({}).values() if "status" in found]
    assert record["status"] == "completed"


@pytest.mark.parametrize("kind", KINDS)
def test_a_store_option_contradicting_runonce_store_is_answered_misconfigured_and_runs_nothing(
    kind, valkey_server, clock, collection, monkeypatch
):
    monkeypatch.setenv("RUNONCE_STORE", "firestore")
    probe = Probe()
    url = f"valkey://127.0.0.1:{valkey_server.port}"
    status, body = _served(kind, probe, store=url, collection=collection)()
    assert (status, body["outcome"], probe.count) == (500, "misconfigured", 0)
    assert (
        f"the run store is '{url}' by the decorator option store= but 'firestore' by RUNONCE_STORE"
        in (body["error"])
    )


def test_a_firestore_client_given_with_a_valkey_store_is_answered_misconfigured(
    valkey_server, clock, collection
):
    probe = Probe()
    url = f"valkey://127.0.0.1:{valkey_server.port}"
    status, body = _served("scheduled", probe, store=url, collection=collection, client=object())()
    assert (status, body["outcome"], probe.count) == (500, "misconfigured", 0)
    assert "a Firestore client (client=) but the run store is a Valkey server" in body["error"]
