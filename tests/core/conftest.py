"""Fixtures for the handler tests: a decorated job served by Flask, a probe that counts what the
job body really ran, a controllable clock, and Scheduler-shaped headers. The store is always the
real Firestore emulator."""

from __future__ import annotations

import json
import threading
import uuid
from collections.abc import Callable
from datetime import UTC, datetime, timedelta

import flask
import pytest

import runonce
from emulator.wire import TappedClient, WireTap
from runonce.scheduler.delivery import parse_delivery
from runonce.scheduler.keys import run_key
from runonce.store.firestore import Ledger
from tests.conftest import PROJECT

SCHEDULED = datetime(2026, 11, 29, 3, 0, tzinfo=UTC)


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


class ManualClock:
    """A clock the test moves forward; installed process-wide with runonce.set_clock."""

    def __init__(self, start: datetime):
        self.current = start
        self._lock = threading.Lock()

    def __call__(self) -> datetime:
        with self._lock:
            return self.current

    def advance(self, seconds: float) -> None:
        with self._lock:
            self.current += timedelta(seconds=seconds)


@pytest.fixture
def clock():
    """Start every test at the scheduled time plus five seconds, as a real delivery would be."""
    manual = ManualClock(SCHEDULED + timedelta(seconds=5))
    runonce.set_clock(manual)
    yield manual
    runonce.set_clock(None)


@pytest.fixture
def tap():
    """Counts round trips and injects faults on the way to the emulator."""
    return WireTap()


@pytest.fixture
def collection():
    """A collection of its own per test, so counts and records never mix."""
    return f"runs_{uuid.uuid4().hex[:12]}"


@pytest.fixture
def tapped_client(firestore_emulator, tap):
    return TappedClient(tap, project=PROJECT)


@pytest.fixture
def probe():
    return Probe()


@pytest.fixture
def app_factory(tapped_client, collection, probe, clock):
    """Build a Flask app serving the probe under @deduplicated with the given options."""

    def build(**options) -> flask.Flask:
        options.setdefault("lease", 120)
        handler = runonce.deduplicated(collection=collection, client=tapped_client, **options)(probe)
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
    return Ledger(tapped_client, collection, timedelta(seconds=120), timedelta(days=7))


def key_of(clock, **headers) -> str:
    """The run key the handler derives for `scheduler_headers(**headers)` at the clock's time."""
    delivery = parse_delivery(scheduler_headers(**headers), clock(), timedelta(seconds=60))
    return run_key(delivery)


@pytest.fixture
def records(tapped_client, collection):
    """Read every record of this test's collection."""

    def read() -> list[dict]:
        return [snapshot.to_dict() for snapshot in tapped_client.collection(collection).stream()]

    return read


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
