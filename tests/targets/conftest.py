"""Fixtures for the Google API targets: the local stand-in for the APIs, fake credentials, the
proxy under @deduplicated on the real Firestore emulator, and Scheduler-shaped deliveries."""

from __future__ import annotations

import contextlib
import threading
import uuid
from collections.abc import Callable
from datetime import timedelta

import flask
import google.auth.credentials
import pytest

import runonce
from emulator.googleapis import GoogleApisStandIn
from runonce.store.firestore import Ledger
from runonce.targets import Target
from runonce.targets.proxy import Proxy
from tests.core.conftest import collection, scheduler_headers, tap, tapped_client

WORKFLOW = "projects/acme-prod/locations/europe-west1/workflows/nightly-etl"
JOB = "projects/acme-prod/locations/europe-west1/jobs/nightly-export"
TRIGGER = "projects/acme-prod/locations/europe-west1/triggers/nightly-build"
FAKE_TOKEN = "fake-access-token-for-tests"

# collection, tap and tapped_client are the core suite's fixtures, reused as they are (clock is
# tests/conftest.py's).
__all__ = [
    "FAKE_TOKEN",
    "JOB",
    "TRIGGER",
    "WORKFLOW",
    "collection",
    "scheduler_headers",
    "tap",
    "tapped_client",
]


class FakeCredentials(google.auth.credentials.Credentials):
    """Credentials that mint a fixed token locally: no metadata server, no key, no network."""

    def __init__(self):
        super().__init__()
        self.refreshes = 0

    def refresh(self, request):
        self.refreshes += 1
        self.token = FAKE_TOKEN


@pytest.fixture
def stand_in():
    """The Google APIs stand-in on a free loopback port."""
    server = GoogleApisStandIn().start()
    yield server
    server.stop()


@pytest.fixture
def ledger(firestore_client, collection):
    """The ledger the proxy's runs are recorded in (lease 120 s)."""
    return Ledger(firestore_client, collection, timedelta(seconds=120), timedelta(days=7))


@pytest.fixture
def proxy_app(firestore_client, collection, stand_in, clock) -> Callable[..., flask.Flask]:
    """Build a Flask app serving the proxy for `target` under @deduplicated (lease 120 s; the
    grace is the proxy's default, the timeout plus 60 s, whatever the environment says)."""

    def build(target: Target, job: Callable | None = None, timeout: float = 2.0) -> flask.Flask:
        proxy = Proxy(
            target, credentials=FakeCredentials(), base_url=stand_in.url, timeout=timeout, environ={}
        )
        return serve(job(proxy) if job is not None else proxy, collection, firestore_client)

    return build


def serve(body: Callable, collection: str, client) -> flask.Flask:
    """A Flask app serving `body` under @deduplicated on `client` (lease 120 s)."""
    handler = runonce.deduplicated(collection=collection, client=client, lease=120)(body)
    app = flask.Flask(f"proxy-test-{uuid.uuid4().hex[:6]}")
    app.add_url_rule("/", "handle", lambda: handler(flask.request), methods=["POST"])
    return app


@contextlib.contextmanager
def first_attempt_dies_after_the_call(proxy_app, target):
    """The first attempt starts the target, then its instance stops for good: it never finishes.

    Modelled as a job that blocks after the call until the test is over, so its claim stays
    `in_progress` exactly as a killed instance leaves it. Released at the end, its late finish
    is fenced off by the takeover (the tests check the record the takeover wrote).
    """
    called, resume = threading.Event(), threading.Event()

    def job(proxy):
        def body(request):
            result = proxy(request)
            called.set()
            resume.wait(30)
            return result

        return body

    client = proxy_app(target, job=job).test_client()
    worker = threading.Thread(target=client.post, args=("/",), kwargs={"headers": scheduler_headers()})
    worker.start()
    try:
        assert called.wait(10), "the first attempt never reached the target"
        yield
    finally:
        resume.set()
        worker.join(30)
