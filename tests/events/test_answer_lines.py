"""The log lines of an event delivery: each names its job (the `job` field the stack's metrics and
alerts label by), and exactly one carries `latency_ms`, the line the answers metric counts, with
the outcome the delivery was answered, also when forwarding the dead-letter copy changed it."""

from __future__ import annotations

import json

import pytest

import runonce
from runonce import ConfigError, PermanentError
from runonce.contract import JOB_VARIABLE
from runonce.core.errors import StoreUnavailable
from runonce.core.event import MAX_CONSUMER_LENGTH, load_event_settings
from runonce.core.settings import load_settings

from .conftest import envelope, post, serve_app

MEMORY = [pytest.param("memory", marks=pytest.mark.fast)]
"""The in-memory store, whose calls a test can make fail (the fast tier)."""
UNUSED_TOPIC = "projects/runonce-local/topics/never-published-to"
"""A dead-letter topic for a test in which no event fails."""


def _lines(capsys) -> list[dict]:
    """The JSON lines written since the last look."""
    return [json.loads(line) for line in capsys.readouterr().out.splitlines() if line.startswith("{")]


def _deliver(client, capsys, body=None):
    """Post `body` (a push envelope by default): the response and the lines written for it."""
    capsys.readouterr()
    response = post(client, envelope() if body is None else body)
    return response, _lines(capsys)


def _step(lines: list[dict], message: str) -> dict:
    """The one line starting with `message`, which must not be the answering one."""
    [line] = [line for line in lines if line["message"].startswith(message)]
    assert "latency_ms" not in line, line
    return line


def _answering(lines: list[dict]) -> dict:
    """The one line that answers the delivery (the one with `latency_ms`)."""
    answering = [line for line in lines if "latency_ms" in line]
    assert len(answering) == 1, [(line["message"], line.get("outcome")) for line in answering]
    return answering[0]


def _refuse(event):
    raise PermanentError("order 7 has no customer")


def test_a_failed_forwarding_is_answered_on_a_line_of_its_own_and_every_line_names_the_job(
    pubsub, push_app, probe, capsys, monkeypatch
):
    monkeypatch.setenv(JOB_VARIABLE, "orders")
    dead = pubsub.topic_path("not-yet")  # the topic does not exist yet: publishing fails
    client = push_app(dead_letter_topic=dead).test_client()
    probe.behaviour = _refuse

    response, lines = _deliver(client, capsys)
    assert response.status_code == 500 and response.json["outcome"] == "dead_letter_failed"
    answering = _answering(lines)
    assert answering["outcome"] == "dead_letter_failed" and answering["reason"] == "permanent_failure"
    assert lines[-1] is answering  # the failure's line comes first, as a step
    assert _step(lines, "job failed permanently")["outcome"] == "failed"
    assert {line["job"] for line in lines} == {"orders"}

    again, lines = _deliver(client, capsys)  # a redelivery, the topic still missing
    assert again.json["outcome"] == "dead_letter_failed"
    assert _answering(lines)["outcome"] == "dead_letter_failed"
    assert {line["job"] for line in lines} == {"orders"}

    pubsub.publisher.create_topic(request={"name": dead})
    forwarded, lines = _deliver(client, capsys)
    assert forwarded.json["outcome"] == "duplicate" and forwarded.json["dead_lettered"] is True
    assert _answering(lines)["outcome"] == "duplicate"
    assert [line["outcome"] for line in lines if "dead_letter_message_id" in line] == ["duplicate"]
    assert probe.count == 1


@pytest.mark.both_stores
@pytest.mark.parametrize("age", [1.0, 10**6], ids=["failed", "too old"])
def test_a_forwarded_event_is_answered_once_on_the_line_before_its_copys(
    store_kind, push_app, probe, capsys, age
):
    from datetime import UTC, datetime, timedelta

    probe.behaviour = _refuse
    client = push_app(max_event_age=600).test_client()
    published = datetime.now(UTC) - timedelta(seconds=age)
    response, lines = _deliver(client, capsys, envelope(publish_time=published))
    outcome = response.json["outcome"]
    assert outcome == ("failed" if age < 600 else "too_old") and response.json["dead_lettered"] is True
    answering = _answering(lines)
    assert answering["outcome"] == outcome
    [copy] = [line for line in lines if "dead_letter_message_id" in line]
    assert copy["outcome"] == outcome and lines.index(answering) < lines.index(copy)


@pytest.mark.parametrize("store_kind", MEMORY)
def test_a_failure_that_was_not_recorded_is_answered_in_progress_on_one_line(
    store_kind, memory_store, push_app, probe, capsys, monkeypatch
):
    monkeypatch.setattr(memory_store, "fail", lambda claim, error: False)  # taken over meanwhile
    probe.behaviour = _refuse
    response, lines = _deliver(push_app().test_client(), capsys)
    assert response.status_code == 409 and response.json["recorded"] is False
    assert _answering(lines)["outcome"] == "in_progress"
    assert _step(lines, "job failed permanently")["recorded"] is False


@pytest.mark.parametrize("store_kind", MEMORY)
def test_a_duplicate_while_the_copy_may_be_on_its_way_is_answered_in_progress_on_one_line(
    store_kind, memory_store, push_app, probe, capsys, monkeypatch
):
    def unmarked(key, fields):
        raise StoreUnavailable("the store did not answer")

    monkeypatch.setattr(memory_store, "annotate", unmarked)  # the copy is sent, not marked
    probe.behaviour = _refuse
    client = push_app().test_client()
    assert post(client, envelope()).json["dead_lettered"] is True
    response, lines = _deliver(client, capsys)
    assert response.status_code == 409 and response.json["forwarding"] is True
    assert _answering(lines)["outcome"] == "in_progress"
    assert _step(lines, "duplicate delivery")["outcome"] == "duplicate"


@pytest.mark.parametrize("store_kind", MEMORY)
def test_a_duplicate_of_a_failure_whose_record_cannot_be_read_is_answered_once(
    store_kind, memory_store, push_app, probe, capsys, monkeypatch
):
    probe.behaviour = _refuse
    client = push_app().test_client()
    post(client, envelope())

    def unreadable(key):
        raise StoreUnavailable("the store did not answer")

    monkeypatch.setattr(memory_store, "read", unreadable)
    response, lines = _deliver(client, capsys)
    assert response.status_code >= 500 and response.json["outcome"] == "store_unavailable"
    assert _answering(lines)["outcome"] == "store_unavailable"
    assert _step(lines, "duplicate delivery")["outcome"] == "duplicate"


@pytest.mark.both_stores
def test_the_job_option_names_the_job_before_runonce_job_and_the_consumer(
    store_kind, push_app, capsys, monkeypatch
):
    monkeypatch.setenv("K_SERVICE", "example-orders")
    for options, named in (({}, "example-orders"), ({"consumer": "billing"}, "billing")):
        capsys.readouterr()
        app = push_app(UNUSED_TOPIC, **options)
        post(app.test_client(), envelope(message_id=f"consumer-{named}"))
        assert {line["job"] for line in _lines(capsys)} == {named}
    monkeypatch.setenv(JOB_VARIABLE, "orders")
    for options, named in (({}, "orders"), ({"job": "invoices"}, "invoices")):
        capsys.readouterr()
        post(push_app(UNUSED_TOPIC, **options).test_client(), envelope(message_id=f"job-{named}"))
        assert {line["job"] for line in _lines(capsys)} == {named}


@pytest.mark.both_stores
def test_a_rejected_or_misconfigured_delivery_names_its_job_too(
    store_kind, push_app, probe, capsys, monkeypatch
):
    monkeypatch.setenv(JOB_VARIABLE, "orders")
    capsys.readouterr()
    assert post(push_app(UNUSED_TOPIC).test_client(), b"not json").json["outcome"] == "rejected"
    assert [line["job"] for line in _lines(capsys)] == ["orders"]
    refused = push_app(UNUSED_TOPIC, lease=10**9)  # a lease longer than a day
    assert post(refused.test_client(), envelope()).json["outcome"] == "misconfigured"
    assert [line["job"] for line in _lines(capsys)] == ["orders"]
    handler = runonce.deduplicated_event(collection="events", client=None, job="invoices")(probe)
    monkeypatch.delenv("RUNONCE_DEAD_LETTER_TOPIC", raising=False)
    assert post(serve_app(handler).test_client(), envelope()).json["outcome"] == "misconfigured"
    assert [line["job"] for line in _lines(capsys)] == ["invoices"]


def test_a_job_name_longer_than_a_consumer_may_be_is_refused_naming_it():
    environ = {"RUNONCE_DEAD_LETTER_TOPIC": "projects/p/topics/dead"}
    settings = load_settings({}, environ=environ)
    longest = "j" * MAX_CONSUMER_LENGTH
    assert load_event_settings(settings, {}, environ={**environ, JOB_VARIABLE: longest}).job == longest
    with pytest.raises(ConfigError, match=JOB_VARIABLE):
        load_event_settings(settings, {}, environ={**environ, JOB_VARIABLE: longest + "j"})
    with pytest.raises(ConfigError, match="job"):
        load_event_settings(settings, {"job": longest + "j"}, environ=environ)
