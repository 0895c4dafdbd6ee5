"""Downstream idempotency: the endpoint decorator answers a repeated token with the stored answer,
and a step guarded by a token runs once. On the real Firestore emulator; the tests marked
`both_stores` on the in-memory store too (the fast tier), and the store failing on the emulator alone."""

from __future__ import annotations

import threading
import uuid
from concurrent.futures import ThreadPoolExecutor

import flask
import grpc
import pytest

import runonce.downstream
from emulator.wire import Fault
from runonce import PermanentError
from runonce.core.errors import StoreDenied, StoreUnavailable
from runonce.downstream import REPLAYED_HEADER, StepInProgress, Steps, idempotent_endpoint, step_key
from runonce.store import firestore as ledger_module
from runonce.targets import IDEMPOTENCY_HEADER
from tests.core.conftest import MemoryConnection, memory_store, tap, tapped_client

__all__ = ["memory_store", "tap", "tapped_client"]  # fixtures, used by name


class Service:
    """A downstream endpoint whose body counts its runs and does what the test asks."""

    def __init__(self):
        self.runs = 0
        self.behaviour = lambda request: ({"charged": request.get_json()["amount"]}, 201)

    def __call__(self, request):
        self.runs += 1
        return self.behaviour(request)


@pytest.fixture
def service():
    return Service()


@pytest.fixture
def store_client(request, store_kind, memory_store, monkeypatch):
    """The `client` option: the tapped Firestore client on the emulator, or None with downstream's
    connection swapped for one to the in-memory store."""
    if store_kind == "firestore":
        return request.getfixturevalue("tapped_client")
    monkeypatch.setattr(
        runonce.downstream, "Connection", lambda overrides, client: MemoryConnection(memory_store, overrides)
    )
    return None


@pytest.fixture
def endpoint(store_client, collection, clock, service):
    """A test client of the service under @idempotent_endpoint (lease 120 s)."""
    handler = idempotent_endpoint(name="charge", collection=collection, client=store_client, lease=120)(
        service
    )
    app = flask.Flask(f"downstream-{uuid.uuid4().hex[:6]}")
    app.add_url_rule("/", "charge", lambda: handler(flask.request), methods=["POST"])
    return app


@pytest.fixture
def steps(store_client, collection, clock):
    return Steps(collection=collection, client=store_client, lease=120)


def _post(app, token="run-key-1", amount=5):
    with app.test_client() as client:
        return client.post("/", json={"amount": amount}, headers={IDEMPOTENCY_HEADER: token} if token else {})


@pytest.mark.both_stores
def test_a_repeated_token_is_answered_with_the_stored_answer_without_running_again(endpoint, service):
    first = _post(endpoint)
    again = _post(endpoint)
    assert (first.status_code, first.json) == (201, {"charged": 5})
    assert (again.status_code, again.json) == (201, {"charged": 5})
    assert again.headers[REPLAYED_HEADER] == "true" and REPLAYED_HEADER not in first.headers
    assert service.runs == 1


@pytest.mark.both_stores
def test_another_token_runs_the_handler_again(endpoint, service):
    _post(endpoint, token="run-key-1")
    _post(endpoint, token="run-key-2")
    assert service.runs == 2


@pytest.mark.both_stores
def test_a_request_without_the_token_is_rejected_and_not_run(endpoint, service):
    response = _post(endpoint, token=None)
    assert response.status_code == 400 and response.json["outcome"] == "rejected"
    assert service.runs == 0


@pytest.mark.both_stores
def test_a_repeat_while_the_first_request_runs_is_answered_409(endpoint, service):
    entered, release = threading.Event(), threading.Event()

    def slow(request):
        entered.set()
        release.wait(10)
        return {"charged": 5}

    service.behaviour = slow
    with ThreadPoolExecutor(1) as pool:
        first = pool.submit(_post, endpoint)
        assert entered.wait(10)
        repeat = _post(endpoint)
        release.set()
        assert first.result().status_code == 200
    assert repeat.status_code == 409 and repeat.json["outcome"] == "in_progress"
    assert service.runs == 1


@pytest.mark.both_stores
def test_a_permanent_failure_is_stored_and_answered_422_to_every_repeat(endpoint, service):
    def reject(request):
        raise PermanentError("card declined")

    service.behaviour = reject
    first, again = _post(endpoint), _post(endpoint)
    assert first.status_code == again.status_code == 422
    assert first.json == {"outcome": "failed", "error": "card declined"} == again.json
    assert service.runs == 1


@pytest.mark.both_stores
@pytest.mark.parametrize("failure", ["exception", "5xx answer"])
def test_a_failed_request_releases_the_token_so_the_retry_runs(endpoint, service, failure):
    def fail_once(request):
        service.behaviour = lambda request: {"charged": 5}
        if failure == "exception":
            raise TimeoutError("card network timed out")
        return {"error": "upstream down"}, 503

    service.behaviour = fail_once
    first = _post(endpoint)
    assert first.status_code >= 500
    retry = _post(endpoint)
    assert (retry.status_code, retry.json) == (200, {"charged": 5})
    assert service.runs == 2


@pytest.mark.both_stores
def test_a_step_runs_once_per_token_and_returns_its_stored_result(steps):
    effects = []

    def charge():
        effects.append("charged")
        return {"charge": len(effects)}

    assert steps.run("run-key-1", "charge-card", charge) == {"charge": 1}
    assert steps.run("run-key-1", "charge-card", charge) == {"charge": 1}
    assert steps.run("run-key-2", "charge-card", charge) == {"charge": 2}
    assert steps.run("run-key-1", "refund", charge) == {"charge": 3}
    assert effects == ["charged"] * 3


@pytest.mark.both_stores
def test_a_step_that_raised_runs_again_and_a_permanent_failure_does_not(steps):
    attempts = []

    def flaky():
        attempts.append(1)
        if len(attempts) == 1:
            raise ConnectionError("bank unreachable")
        raise PermanentError("account closed")

    with pytest.raises(ConnectionError):
        steps.run("run-key-1", "charge-card", flaky)
    with pytest.raises(PermanentError, match="account closed"):
        steps.run("run-key-1", "charge-card", flaky)
    with pytest.raises(PermanentError, match="account closed"):
        steps.run("run-key-1", "charge-card", flaky)
    assert len(attempts) == 2


@pytest.mark.both_stores
def test_a_step_held_by_another_attempt_is_not_run(steps):
    steps.store.claim(step_key("run-key-1", "charge-card"), {"step": "charge-card"})
    with pytest.raises(StepInProgress):
        steps.run("run-key-1", "charge-card", lambda: pytest.fail("must not run"))


@pytest.mark.both_stores
def test_a_step_returns_the_same_value_first_and_to_every_repeat(steps):
    class Receipt:
        """Not JSON-like: nothing of it can be stored."""

    assert steps.run("run-key-1", "pair", lambda: (1, 2)) == [1, 2] == steps.run("run-key-1", "pair", dict)
    assert steps.run("run-key-1", "receipt", Receipt) is None is steps.run("run-key-1", "receipt", Receipt)


@pytest.mark.both_stores
def test_a_step_whose_permanent_error_cannot_be_printed_is_recorded_failed(steps):
    class Unprintable(PermanentError):
        def __str__(self):
            raise RuntimeError("no message")

    def refuse():
        raise Unprintable()

    with pytest.raises(Unprintable):
        steps.run("run-key-1", "charge-card", refuse)
    with pytest.raises(PermanentError, match="Unprintable"):
        steps.run("run-key-1", "charge-card", lambda: pytest.fail("must not run"))


@pytest.fixture
def tapped_steps(tapped_client, collection, clock, monkeypatch):
    """Steps on the emulator through the wire tap, with store budgets of 1 s and 2 s."""
    monkeypatch.setattr(ledger_module, "CLAIM_SECONDS", 1.0)
    monkeypatch.setattr(ledger_module, "RELEASE_SECONDS", 1.0)
    monkeypatch.setattr(ledger_module, "FINISH_SECONDS", 2.0)
    return Steps(collection=collection, client=tapped_client, lease=120)


def test_a_step_whose_store_is_down_raises_store_unavailable_and_does_not_run(tapped_steps, tap):
    tap.inject(Fault("Commit", times=100))
    with pytest.raises(StoreUnavailable, match="unavailable"):
        tapped_steps.run("run-key-1", "charge-card", lambda: pytest.fail("must not run"))


def test_a_step_whose_store_refuses_this_identity_raises_store_denied_naming_the_grant(tapped_steps, tap):
    tap.inject(Fault("Commit", grpc.StatusCode.PERMISSION_DENIED))
    with pytest.raises(StoreDenied, match=r"roles/datastore\.user"):
        tapped_steps.run("run-key-1", "charge-card", lambda: pytest.fail("must not run"))


def test_a_step_whose_completion_cannot_be_written_raises_store_unavailable_after_running_once(
    tapped_steps, tap
):
    effects = []

    def charge():
        effects.append("charged")
        tap.inject(Fault("Commit", times=100))  # the completion write
        return {"charge": 1}

    with pytest.raises(StoreUnavailable):
        tapped_steps.run("run-key-1", "charge-card", charge)
    tap.reset()
    with pytest.raises(StepInProgress):  # held until its lease ends: not run again meanwhile
        tapped_steps.run("run-key-1", "charge-card", charge)
    assert effects == ["charged"]
