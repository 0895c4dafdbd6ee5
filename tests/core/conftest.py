"""Fixtures for the handler tests: a decorated job served by Flask, a probe that counts what the
job body really ran, and Scheduler-shaped headers. The job is served on the real Firestore emulator;
a test marked `both_stores` is served on the in-memory store too (see tests/conftest.py), and then
`records` reads that store. A test that injects faults (`tap`) or writes the ledger itself
(`ledger`, `tapped_client`) runs on the emulator alone."""

from __future__ import annotations

import json
import threading
import uuid
from collections.abc import Callable
from datetime import timedelta

import flask
import pytest

import runonce
from emulator.wire import TappedClient, WireTap
from runonce.core.settings import DEFAULT_RETENTION_SECONDS, load_settings
from runonce.scheduler import adapter
from runonce.scheduler.delivery import parse_delivery
from runonce.scheduler.keys import run_key
from runonce.store.connection import Setup
from runonce.store.firestore import Ledger
from runonce.store.memory import MemoryStore
from tests.conftest import PROJECT

LEASE = timedelta(seconds=120)
"""The lease of the apps `app_factory` builds, unless a test gives another."""


class Probe:
    """The job body: records every execution, then does what the test asks."""

    def __init__(self):
        self.runs: list[runonce.Run] = []
        self.behaviour: Callable[[flask.Request], object] = lambda request: {"rows": 42}
        self._lock = threading.Lock()

    def __call__(self, request):
        with self._lock:
            self.runs.append(runonce.current_run())
        return self.behaviour(request)

    @property
    def count(self) -> int:
        """How many times the job body started."""
        return len(self.runs)


@pytest.fixture
def tap(store_kind):
    """Counts round trips and injects faults on the way to the emulator."""
    if store_kind == "memory":
        pytest.fail("this test injects faults on the wire to Firestore: it cannot run on the in-memory store")
    return WireTap()


@pytest.fixture
def collection():
    """A collection of its own per test, so counts and records never mix."""
    return f"runs_{uuid.uuid4().hex[:12]}"


@pytest.fixture
def tapped_client(request, store_kind, tap):
    if store_kind == "memory":
        pytest.fail("this test reaches the Firestore client itself: it cannot run on the in-memory store")
    request.getfixturevalue("firestore_emulator")
    return TappedClient(tap, project=PROJECT)


@pytest.fixture
def probe():
    return Probe()


class MemoryConnection:
    """What `runonce.store.connection.Connection` gives a decorated job, on the in-memory store."""

    def __init__(self, store: MemoryStore, overrides: dict):
        self._store = store
        self._overrides = overrides

    def get(self) -> Setup:
        """The settings from the decorator's options (a bad one raises ConfigError), the store."""
        settings = load_settings(self._overrides)
        if (settings.lease, settings.retention) != (self._store.lease, self._store.retention):
            raise AssertionError("this test's in-memory store has another lease or retention than its app")
        return Setup(settings, self._store, PROJECT)


@pytest.fixture
def memory_store(store_kind, clock):
    """The in-memory store of a test run on it (None on the emulator), on the test's clock."""
    if store_kind != "memory":
        return None
    return MemoryStore(LEASE, timedelta(seconds=DEFAULT_RETENTION_SECONDS), clock)


@pytest.fixture
def serving_client(request, store_kind, memory_store, monkeypatch):
    """The `client` option of the apps: the tapped Firestore client, or None with the decorator's
    connection swapped for one to the in-memory store."""
    if store_kind == "firestore":
        return request.getfixturevalue("tapped_client")
    monkeypatch.setattr(
        adapter, "Connection", lambda overrides, client: MemoryConnection(memory_store, overrides)
    )
    return None


@pytest.fixture
def app_factory(serving_client, collection, probe, clock):
    """Build a Flask app serving the probe under @deduplicated with the given options."""

    def build(**options) -> flask.Flask:
        options.setdefault("lease", int(LEASE.total_seconds()))
        handler = runonce.deduplicated(collection=collection, client=serving_client, **options)(probe)
        app = flask.Flask(f"runonce-test-{uuid.uuid4().hex[:6]}")
        # As functions-framework does: the job gets the request itself, not Flask's proxy of it.
        app.add_url_rule(
            "/", "handle", lambda: handler(flask.request._get_current_object()), methods=["POST", "GET"]
        )
        return app

    return build


@pytest.fixture
def client(app_factory):
    """A test client of the default app (lease 120 s)."""
    return app_factory().test_client()


@pytest.fixture
def ledger(tapped_client, collection):
    """The ledger the app under test uses (same collection, lease 120 s)."""
    return Ledger(tapped_client, collection, LEASE, timedelta(days=7))


def key_of(clock, **headers) -> str:
    """The run key the handler derives for `scheduler_headers(**headers)` at the clock's time."""
    delivery = parse_delivery(scheduler_headers(**headers), clock(), timedelta(seconds=60))
    return run_key(delivery)


@pytest.fixture
def records(request, store_kind, memory_store, collection):
    """Read every record of this test's collection (of the in-memory store, on it) but the
    completions entries (`Run.previous`), which tests/store/test_conformance_previous.py checks."""
    if store_kind == "memory":
        return lambda: [record for record in memory_store.records() if not _entry(record)]
    client = request.getfixturevalue("tapped_client")

    def read() -> list[dict]:
        found = (snapshot.to_dict() for snapshot in client.collection(collection).stream())
        return [record for record in found if not _entry(record)]

    return read


def _entry(record: dict) -> bool:
    """Whether `record` is a completions entry (it names its run, and has no status of its own)."""
    return "run_key" in record and "status" not in record


def scheduler_headers(
    job: str = "nightly-report",
    time: str = "2026-11-29T03:00:00Z",
    project: str = "acme-prod",
    location: str = "europe-west1",
) -> dict[str, str]:
    """Headers as Cloud Scheduler (plus the runonce stack) sends them."""
    return {
        "User-Agent": "Google-Cloud-Scheduler",
        "X-CloudScheduler": "true",
        "X-CloudScheduler-JobName": job,
        "X-CloudScheduler-ScheduleTime": time,
        "X-Runonce-Project": project,
        "X-Runonce-Location": location,
    }


@pytest.fixture
def log_lines(capsys):
    """The JSON log lines written so far (each read once), as raw text and parsed."""

    def read() -> list[tuple[str, dict]]:
        out = capsys.readouterr().out
        return [(line, json.loads(line)) for line in out.splitlines() if line.startswith("{")]

    return read
