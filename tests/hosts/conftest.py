"""Fixtures for the host adapters' tests: one job served on every host through its framework's
own test client, with the stores of tests/core (the Firestore emulator, and the in-memory store
for a test marked `both_stores`).

`host` names the framework and the job's kind; `serve(**options)` builds that host's app around
the probe and gives a `Client` whose `post(headers)` returns (status, JSON body) whatever the
framework. An ASGI host's job is `async def` or `def` as its name says.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any, NamedTuple

import django
import flask
import pytest
from django.conf import settings

import runonce
from runonce.scheduler import asgi
from tests.core import conftest as core
from tests.core.conftest import LEASE, MemoryConnection

from . import django_urls

if not settings.configured:
    settings.configure(
        ROOT_URLCONF="tests.hosts.django_urls",
        ALLOWED_HOSTS=["*"],
        MIDDLEWARE=[],
        SECRET_KEY="runonce-tests",
        USE_TZ=True,
    )
    django.setup()

# The fixtures of tests/core this package uses, registered here by name.
collection, log_lines, memory_store = core.collection, core.log_lines, core.memory_store
records, tap, tapped_client = core.records, core.tap, core.tapped_client

WSGI_HOSTS = ["functions-framework", "flask-view", "django"]
ASGI_HOSTS = ["starlette-def", "starlette-async", "fastapi-def", "fastapi-async"]
HOSTS = WSGI_HOSTS + ASGI_HOSTS


class Probe:
    """The job body on any host: records each run, then does what the test asks."""

    def __init__(self):
        self.runs: list[Any] = []
        self.behaviour: Callable[[], object] = lambda: {"rows": 42}

    def __call__(self) -> object:
        self.runs.append(runonce.current_run())
        return self.behaviour()

    @property
    def count(self) -> int:
        """How many times the job body started."""
        return len(self.runs)


class Client(NamedTuple):
    """One host's app, posted to as Scheduler would: (status, JSON body)."""

    post: Callable[[dict[str, str]], tuple[int, dict[str, Any]]]


@pytest.fixture
def probe() -> Probe:
    return Probe()


@pytest.fixture(params=HOSTS)
def host(request) -> str:
    """Every host, the test run once per host."""
    return request.param


@pytest.fixture
def serving_client(request, store_kind, memory_store, monkeypatch):
    """The `client` option: the tapped Firestore client, or None with both decorators' connection
    swapped for one to the in-memory store."""
    if store_kind == "firestore":
        return request.getfixturevalue("tapped_client")
    memory = lambda overrides, client: MemoryConnection(memory_store, overrides)  # noqa: E731
    monkeypatch.setattr("runonce.scheduler.adapter.Connection", memory)
    monkeypatch.setattr(asgi, "Connection", memory)
    return None


@pytest.fixture
def serve(host, serving_client, collection, probe, clock):
    """Build the host's app around the probe under @deduplicated with the given options."""

    def build(**options) -> Client:
        options.setdefault("lease", int(LEASE.total_seconds()))
        options = {"collection": collection, "client": serving_client, **options}
        return BUILDERS[host](probe, options)

    return build


def _functions_framework(probe: Probe, options: dict) -> Client:
    handler = runonce.deduplicated(**options)(lambda request: probe())
    app = flask.Flask(f"ff-{uuid.uuid4().hex[:6]}")
    # As functions-framework does: the job gets the request itself.
    app.add_url_rule("/", "f", lambda: handler(flask.request._get_current_object()), methods=["POST"])
    return _flask_client(app)


def _flask_view(probe: Probe, options: dict) -> Client:
    app = flask.Flask(f"view-{uuid.uuid4().hex[:6]}")

    @app.post("/jobs/<name>")
    @runonce.deduplicated(**options)
    def close(name: str):
        assert name == "close"
        return probe()

    client = app.test_client()

    def post(headers):
        response = client.post("/jobs/close", headers=headers)
        return response.status_code, response.get_json()

    return Client(post)


def _flask_client(app: flask.Flask) -> Client:
    client = app.test_client()

    def post(headers):
        response = client.post("/", headers=headers)
        return response.status_code, response.get_json()

    return Client(post)


def _django(probe: Probe, options: dict) -> Client:
    from django.test import Client as DjangoClient
    from django.urls import clear_url_caches, path

    @runonce.deduplicated(**options)
    def close(request, name):
        assert request.method == "POST" and name == "close"
        return probe()

    django_urls.urlpatterns[:] = [path("jobs/<str:name>", close)]
    clear_url_caches()
    client = DjangoClient()

    def post(headers):
        response = client.post("/jobs/close", headers=headers)
        return response.status_code, response.json()

    return Client(post)


def _asgi_job(probe: Probe, awaited: bool) -> Callable:
    if awaited:

        async def job(request):
            return probe()

        return job
    return lambda request: probe()


def _starlette(awaited: bool) -> Callable[[Probe, dict], Client]:
    def build(probe: Probe, options: dict) -> Client:
        from starlette.applications import Starlette
        from starlette.routing import Route

        endpoint = asgi.deduplicated(**options)(_asgi_job(probe, awaited))
        return _asgi_client(Starlette(routes=[Route("/jobs/close", endpoint, methods=["POST"])]))

    return build


def _fastapi(awaited: bool) -> Callable[[Probe, dict], Client]:
    def build(probe: Probe, options: dict) -> Client:
        from fastapi import FastAPI

        app = FastAPI()
        app.post("/jobs/close")(asgi.deduplicated(**options)(_asgi_job(probe, awaited)))
        return _asgi_client(app)

    return build


def _asgi_client(app) -> Client:
    from starlette.testclient import TestClient

    client = TestClient(app)

    def post(headers):
        response = client.post("/jobs/close", headers=headers)
        return response.status_code, response.json()

    return Client(post)


BUILDERS: dict[str, Callable[[Probe, dict], Client]] = {
    "functions-framework": _functions_framework,
    "flask-view": _flask_view,
    "django": _django,
    "starlette-def": _starlette(awaited=False),
    "starlette-async": _starlette(awaited=True),
    "fastapi-def": _fastapi(awaited=False),
    "fastapi-async": _fastapi(awaited=True),
}
