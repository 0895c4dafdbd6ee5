"""`@deduplicated_event` in a service: a Flask view, a Django view and FastAPI/Starlette routes
receiving Pub/Sub push, and CloudEvents over HTTP (Eventarc to a Cloud Run service, read by the
cloudevents SDK's `from_http`), answered by status as functions-framework's push endpoint is, with
the same records and dead-letter copies."""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable
from typing import Any, NamedTuple

import flask
import pytest
from cloudevents.conversion import to_binary, to_structured
from cloudevents.http import CloudEvent
from fastapi import FastAPI
from starlette.applications import Starlette
from starlette.routing import Route
from starlette.testclient import TestClient

import runonce
from runonce.contract import DEAD_LETTER_REASON_ATTRIBUTE
from runonce.events import adapter
from runonce.events import asgi as events_asgi
from tests.events.conftest import MemoryEventConnection, envelope
from tests.hosts import django_urls

pytestmark = pytest.mark.both_stores

HOSTS = [
    "functions-framework",
    "flask-view",
    "django-view",
    "fastapi-def",
    "fastapi-async",
    "starlette-async",
]


class Client(NamedTuple):
    """One host's app: `post(headers, body)` -> (status, JSON body)."""

    post: Callable[[dict[str, str], bytes], tuple[int, dict[str, Any]]]


@pytest.fixture(params=HOSTS)
def host(request) -> str:
    return request.param


@pytest.fixture
def serve(
    request,
    host,
    store_kind,
    memory_store,
    recorded_copies,
    dead_letter_topic,
    collection,
    probe,
    monkeypatch,
):
    """Build the host's app around the probe under its @deduplicated_event (see tests/events'
    `event_handler`: on the emulators, or on the in-memory store with the copies kept)."""
    if store_kind == "memory":
        monkeypatch.setattr(
            adapter,
            "EventConnection",
            lambda overrides, client: MemoryEventConnection(memory_store, overrides, recorded_copies),
        )
    client = None if store_kind == "memory" else request.getfixturevalue("tapped_client")
    topic = dead_letter_topic.name

    def build() -> Client:
        options = {"collection": collection, "client": client, "dead_letter_topic": topic, "lease": 60}
        options["consumer"] = "orders-service"
        return BUILDERS[host](probe, options)

    return build


def _functions_framework(probe, options) -> Client:
    handler = runonce.deduplicated_event(**options)(probe)
    app = flask.Flask(f"ff-{uuid.uuid4().hex[:6]}")
    app.add_url_rule("/events", "e", lambda: handler(flask.request._get_current_object()), methods=["POST"])
    return _flask_client(app)


def _flask_view(probe, options) -> Client:
    app = flask.Flask(f"view-{uuid.uuid4().hex[:6]}")

    @app.post("/<path:where>")
    @runonce.deduplicated_event(**options)
    def on_event(event):
        return probe(event)

    return _flask_client(app)


def _flask_client(app) -> Client:
    client = app.test_client()

    def post(headers, body):
        response = client.post("/events", headers=headers, data=body)
        return response.status_code, response.get_json()

    return Client(post)


def _django_view(probe, options) -> Client:
    from django.test import Client as DjangoClient
    from django.urls import clear_url_caches, path

    @runonce.deduplicated_event(**options)
    def on_event(event):
        return probe(event)

    django_urls.urlpatterns[:] = [path("events", on_event)]
    clear_url_caches()
    client = DjangoClient()

    def post(headers, body):
        # Django's test client takes the body's type apart from the other headers.
        kind = {name: value for name, value in headers.items() if name.lower() != "content-type"}
        content_type = next(
            (v for n, v in headers.items() if n.lower() == "content-type"), "application/json"
        )
        response = client.post("/events", data=body, content_type=content_type, headers=kind)
        return response.status_code, response.json()

    return Client(post)


def _asgi_job(probe, awaited: bool):
    if awaited:

        async def job(event):
            return probe(event)

        return job
    return probe


def _fastapi(awaited: bool):
    def build(probe, options) -> Client:
        app = FastAPI()
        app.post("/events")(events_asgi.deduplicated_event(**options)(_asgi_job(probe, awaited)))
        return _asgi_client(app)

    return build


def _starlette(probe, options) -> Client:
    endpoint = events_asgi.deduplicated_event(**options)(_asgi_job(probe, True))
    return _asgi_client(Starlette(routes=[Route("/events", endpoint, methods=["POST"])]))


def _asgi_client(app) -> Client:
    client = TestClient(app)

    def post(headers, body):
        response = client.post("/events", headers=headers, content=body)
        return response.status_code, response.json()

    return Client(post)


BUILDERS = {
    "functions-framework": _functions_framework,
    "flask-view": _flask_view,
    "django-view": _django_view,
    "fastapi-def": _fastapi(awaited=False),
    "fastapi-async": _fastapi(awaited=True),
    "starlette-async": _starlette,
}
JSON = {"Content-Type": "application/json"}


def _push(**fields) -> bytes:
    return json.dumps(envelope(**fields)).encode()


def _cloud_event(event_id: str = "ce-1", data: dict | None = None) -> CloudEvent:
    attributes = {"type": "com.example.order", "source": "//orders/service", "id": event_id}
    return CloudEvent(attributes, data or {"order": 7})


def test_a_push_runs_once_and_its_redelivery_is_a_duplicate(serve, probe):
    client = serve()
    status, body = client.post(JSON, _push())
    assert (status, body["outcome"], body["result"]) == (200, "completed", {"seen": "1001"})
    status, body = client.post(JSON, _push())
    assert (status, body["outcome"]) == (200, "duplicate")
    assert probe.count == 1 and probe.events[0].kind == "pubsub"


def test_a_cloud_event_over_http_runs_once_in_binary_and_structured_mode(serve, probe):
    client = serve()
    headers, data = to_binary(_cloud_event())
    status, body = client.post(dict(headers), data)
    assert (status, body["outcome"]) == (200, "completed")
    headers, data = to_structured(_cloud_event())  # the same event, the other way
    status, body = client.post(dict(headers), data)
    assert (status, body["outcome"]) == (200, "duplicate")
    assert probe.count == 1
    event = probe.events[0]
    assert (event.kind, event.id, event.source, event.json()) == (
        "cloudevent",
        "ce-1",
        "//orders/service",
        {"order": 7},
    )
    assert probe.runs[0].consumer == "orders-service"


def test_a_cloud_event_without_its_id_is_rejected_400(serve, probe):
    status, body = serve().post({"ce-specversion": "1.0", "ce-type": "t", "ce-source": "s"}, b"{}")
    assert (status, body["outcome"]) == (400, "rejected")
    assert probe.count == 0


def test_a_permanent_failure_is_dead_lettered_then_acknowledged(serve, probe, dead_letter_topic):
    def broken(event):
        raise runonce.PermanentError("no sku")

    probe.behaviour = broken
    status, body = serve().post(JSON, _push(data=b'{"order": 8}'))
    assert (status, body["outcome"], body["error"]) == (200, "failed", "no sku")
    [copy] = dead_letter_topic.copies(1)
    assert copy.data == b'{"order": 8}'
    assert copy.attributes[DEAD_LETTER_REASON_ATTRIBUTE] == "permanent_failure"


def test_a_retryable_failure_is_answered_500_and_the_redelivery_runs_it(serve, probe):
    client = serve()
    probe.behaviour = lambda event: 1 / 0
    status, body = client.post(JSON, _push())
    assert (status, body["outcome"]) == (500, "retry")
    probe.behaviour = lambda event: "fixed"
    status, body = client.post(JSON, _push())
    assert (status, body["outcome"], body["result"]) == (200, "completed", "fixed")
    assert probe.count == 2


def test_a_body_that_is_no_envelope_is_rejected_400(serve, probe):
    status, body = serve().post(JSON, b"not json")
    assert (status, body["outcome"]) == (400, "rejected")
    assert probe.count == 0
