"""Defect classes 5 and 6: a @deduplicated call nested in a job, and whatever a job can raise.
Every way out is a JSON answer with an outcome, and no claim is left needlessly held."""

from __future__ import annotations

import threading

import pytest

import runonce
from runonce import PermanentError
from runonce.core import handler
from runonce.core.errors import NestedRunError

from .conftest import scheduler_headers


class Unprintable(Exception):
    """An exception whose str() and repr() both raise."""

    def __str__(self):
        raise ValueError("no str for you")

    def __repr__(self):
        raise ValueError("no repr either")


class UnprintablePermanent(PermanentError):
    def __str__(self):
        raise ValueError("no str for you")

    def __repr__(self):
        raise ValueError("no repr either")


class SneakyText(str):
    """A str subclass that misbehaves once it has been returned from __str__."""

    def __len__(self):
        raise RuntimeError("no length")

    def __getitem__(self, index):
        raise RuntimeError("no slicing")


class SneakyMessage(Exception):
    def __str__(self):
        return SneakyText("sneaky message")


class NotAnException(BaseException):
    """Raised by a job that thinks BaseException is the base to extend."""


def _raise(exc):
    def job(request):
        raise exc

    return job


@pytest.mark.parametrize(
    "exc",
    [Unprintable(), SneakyMessage(), NotAnException("custom base"), GeneratorExit()],
    ids=["str and repr raise", "str returns a misbehaving str", "BaseException subclass", "GeneratorExit"],
)
@pytest.mark.both_stores
def test_whatever_a_job_raises_is_answered_json_retry_and_the_claim_released(client, probe, records, exc):
    probe.behaviour = _raise(exc)
    response = client.post("/", headers=scheduler_headers())
    assert response.status_code == 500 and response.is_json
    assert response.json["outcome"] == "retry"
    assert records() == []


@pytest.mark.both_stores
def test_a_permanent_error_whose_str_raises_is_recorded_failed_and_answered_json(client, probe, records):
    probe.behaviour = _raise(UnprintablePermanent())
    first = client.post("/", headers=scheduler_headers())
    assert first.status_code == 200 and first.json["outcome"] == "failed"
    assert "could not be read" in first.json["error"]
    [record] = records()
    assert record["status"] == "failed" and record["error"] == first.json["error"]
    assert client.post("/", headers=scheduler_headers()).json["error"] == first.json["error"]


@pytest.mark.parametrize("exc", [SystemExit(3), KeyboardInterrupt()], ids=["SystemExit", "KeyboardInterrupt"])
@pytest.mark.both_stores
def test_a_job_that_stops_the_process_releases_its_claim_first(client, probe, records, exc):
    probe.behaviour = _raise(exc)
    with pytest.raises(type(exc)):
        client.post("/", headers=scheduler_headers())
    assert records() == []  # the retry runs at once instead of waiting out the lease


def test_a_record_runonce_cannot_read_is_answered_json_error(client, probe, clock, ledger):
    from .conftest import key_of

    claim = ledger.claim(key_of(clock), {"job": "nightly-report"})
    ledger._collection.document(claim.key).update({"status": "from-a-newer-version"})
    response = client.post("/", headers=scheduler_headers())
    assert response.status_code == 500 and response.json["outcome"] == "error"
    assert probe.count == 0


@pytest.mark.both_stores
def test_runonce_failing_after_the_job_succeeded_still_records_the_completion(
    client, probe, records, monkeypatch
):
    def broken(value):
        raise RuntimeError("a bug in runonce")

    monkeypatch.setattr(handler.StoredResult, "of", broken)
    response = client.post("/", headers=scheduler_headers())
    assert response.status_code == 200 and response.json["outcome"] == "completed"
    assert response.json["result_stored"] is False
    [record] = records()
    assert record["status"] == "completed"
    assert probe.count == 1


@pytest.mark.both_stores
def test_runonce_failing_before_the_job_ran_releases_the_claim(client, probe, records, monkeypatch):
    def broken(run, request):
        raise RuntimeError("a bug in runonce")

    monkeypatch.setattr(handler, "enter", broken)
    response = client.post("/", headers=scheduler_headers())
    assert response.status_code == 500 and response.json["outcome"] in ("retry", "error")
    assert records() == []
    assert probe.count == 0


def _inner_job(tapped_client, collection):
    @runonce.deduplicated(collection=collection, client=tapped_client)
    def publish(request):
        return "published"

    return publish


def test_a_deduplicated_function_called_inside_a_deduplicated_job_raises_a_clear_error(
    client, probe, records, tapped_client, collection
):
    publish = _inner_job(tapped_client, collection)
    seen: list[BaseException] = []

    def outer(request):
        try:
            return publish(request)
        except NestedRunError as exc:
            seen.append(exc)
            raise

    probe.behaviour = outer
    response = client.post("/", headers=scheduler_headers())
    assert response.status_code == 500 and response.json == {
        "outcome": "retry",
        "run_key": response.json["run_key"],
        "error": "NestedRunError",
    }
    [error] = seen
    assert "publish" in str(error) and "__wrapped__" in str(error)
    assert records() == []  # the outer run is not recorded completed: it is retried


def test_a_nested_call_from_a_thread_the_job_started_is_caught_too(client, probe, tapped_client, collection):
    publish = _inner_job(tapped_client, collection)
    caught: list[BaseException] = []

    def outer(request):
        def work():
            try:
                publish(request)
            except NestedRunError as exc:
                caught.append(exc)

        thread = threading.Thread(target=work)  # no context copied: caught by the request
        thread.start()
        thread.join()
        return "done"

    probe.behaviour = outer
    client.post("/", headers=scheduler_headers())
    assert len(caught) == 1


def test_the_undecorated_function_can_be_called_inside_a_job(client, probe, tapped_client, collection):
    publish = _inner_job(tapped_client, collection)
    probe.behaviour = lambda request: publish.__wrapped__(request)
    assert client.post("/", headers=scheduler_headers()).json["result"] == "published"
