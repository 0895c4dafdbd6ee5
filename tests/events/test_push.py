"""@deduplicated_event under functions_framework.http, driven directly with push envelopes: every
answer of the events status table, the envelope checks, and the dead-letter copies (read back from
a real subscription on the real Pub/Sub emulator). The store is the real Firestore emulator."""

from __future__ import annotations

import base64
import threading
from datetime import UTC, datetime, timedelta

import pytest

import runonce
from runonce import PermanentError
from runonce.core.event import EventRun
from runonce.events.parse import event_key, parse_push

from .conftest import envelope, post


def _key(body: dict) -> str:
    import json

    return event_key(parse_push(json.dumps(body).encode()))


@pytest.mark.both_stores
def test_an_event_runs_once_and_is_answered_200_with_its_result(store_kind, push_app, probe, records):
    client = push_app().test_client()
    response = post(client, envelope())
    assert response.status_code == 200 and response.json["outcome"] == "completed"
    assert response.json["result"] == {"seen": "1001"}
    [event] = probe.events
    assert event.data == b'{"order": 7}' and event.json() == {"order": 7}
    assert event.attributes == {"kind": "order"} and event.kind == "pubsub"
    assert event.source == "projects/runonce-local/subscriptions/orders-push" and event.id == "1001"
    assert event.delivery_attempt is None and event.time is not None
    [record] = records().values()
    assert record["status"] == "completed" and record["event_id"] == "1001"


@pytest.mark.both_stores
def test_current_run_is_an_event_run_with_the_event_and_the_ledger_attempt(store_kind, push_app, probe):
    post(push_app().test_client(), envelope(deliveryAttempt=3))
    [run] = probe.runs
    assert isinstance(run, EventRun) and not isinstance(run, runonce.Run)
    assert run.event is probe.events[0] and run.event.delivery_attempt == 3
    assert run.attempt == 1 and run.key == _key(envelope()) and run.attempt_id
    assert run.event.source == "projects/runonce-local/subscriptions/orders-push"


@pytest.mark.both_stores
def test_an_event_run_has_no_scheduled_fields(store_kind, push_app, probe):
    post(push_app().test_client(), envelope())
    [run] = probe.runs
    for scheduled_only in ("job", "schedule_time", "project", "location", "forced"):
        assert not hasattr(run, scheduled_only), scheduled_only


@pytest.mark.both_stores
def test_a_duplicate_message_id_is_answered_200_without_running(store_kind, push_app, probe):
    client = push_app().test_client()
    first = post(client, envelope())
    again = post(client, envelope(data=b"changed"))
    assert again.status_code == 200 and again.json["outcome"] == "duplicate"
    assert again.json["result"] == first.json["result"] and again.json["status"] == "completed"
    assert probe.count == 1


@pytest.mark.both_stores
def test_the_same_message_id_on_another_subscription_is_another_event(store_kind, push_app, probe):
    client = push_app().test_client()
    post(client, envelope())
    other = post(client, envelope(subscription="projects/runonce-local/subscriptions/audit-push"))
    assert other.json["outcome"] == "completed" and probe.count == 2


def test_the_happy_path_is_two_firestore_round_trips(push_app, tap):
    client = push_app().test_client()
    post(client, envelope(message_id="warm"))
    tap.reset()
    assert post(client, envelope(message_id="counted")).json["outcome"] == "completed"
    assert tap.total() == 2


def test_an_event_held_by_a_live_lease_is_answered_409_without_running(push_app, probe):
    client = push_app().test_client()
    inside, release = threading.Event(), threading.Event()
    probe.behaviour = lambda event: (inside.set(), release.wait(10), "done")[-1]
    first: list = []
    worker = threading.Thread(target=lambda: first.append(post(client, envelope())))
    worker.start()
    assert inside.wait(10)
    second = post(client, envelope())
    release.set()
    worker.join()
    assert second.status_code == 409 and second.json["outcome"] == "in_progress"
    assert first[0].status_code == 200 and probe.count == 1


@pytest.mark.both_stores
def test_any_other_exception_is_answered_500_and_releases_the_claim(store_kind, push_app, probe, records):
    client = push_app().test_client()
    probe.behaviour = lambda event: 1 / 0
    response = post(client, envelope())
    assert response.status_code == 500 and response.json["outcome"] == "retry"
    assert records() == {}
    probe.behaviour = lambda event: "second time lucky"
    assert post(client, envelope()).json["result"] == "second time lucky"
    assert probe.count == 2


@pytest.mark.both_stores
def test_a_permanent_failure_is_recorded_dead_lettered_with_runonce_attributes_then_acked(
    store_kind, dead_letter_topic, push_app, probe, records
):
    client = push_app(dead_letter_topic=dead_letter_topic.name).test_client()

    def refuse(event):
        raise PermanentError("order 7 does not exist")

    probe.behaviour = refuse
    body = envelope(attributes={"kind": "order", "tenant": "acme"})
    response = post(client, body)
    assert response.status_code == 200 and response.json["outcome"] == "failed"
    assert response.json["dead_lettered"] is True
    [copy] = dead_letter_topic.copies(1)
    assert copy.data == b'{"order": 7}'
    assert dict(copy.attributes) == {
        "kind": "order",
        "tenant": "acme",
        "runonce_reason": "permanent_failure",
        "runonce_run_key": _key(body),
        "runonce_attempt": "1",
        "runonce_error": "order 7 does not exist",
        "runonce_origin": "projects/runonce-local/subscriptions/orders-push",
        "runonce_event_id": "1001",
    }
    [record] = records().values()
    assert record["status"] == "failed" and record["dead_letter_reason"] == "permanent_failure"
    assert record["dead_letter_message_id"] == copy.message_id
    # A redelivery (a lost ack) neither runs the job nor forwards a second copy.
    again = post(client, body)
    assert again.status_code == 200 and again.json["outcome"] == "duplicate"
    assert dead_letter_topic.copies(0, timeout=1.5) == [] and probe.count == 1


def test_an_event_older_than_the_maximum_age_is_dead_lettered_and_not_run(pubsub, push_app, probe, records):
    dead = pubsub.topic("dead")
    letters = pubsub.pull_subscription("dead-letters", dead)
    client = push_app(dead_letter_topic=dead, max_event_age=600).test_client()
    old = envelope(publish_time=datetime.now(UTC) - timedelta(seconds=700))
    response = post(client, old)
    assert response.status_code == 200 and response.json["outcome"] == "too_old"
    assert probe.count == 0
    [copy] = pubsub.pull(letters, 1)
    assert copy.attributes["runonce_reason"] == "too_old"
    assert "RUNONCE_MAX_EVENT_AGE_SECONDS (600 s)" in copy.attributes["runonce_error"]
    [record] = records().values()
    assert record["status"] == "failed" and record["error"].startswith("too old: ")


def test_a_failed_forwarding_is_answered_500_and_the_next_delivery_forwards_it(pubsub, push_app, probe):
    dead = pubsub.topic_path("not-yet")  # the topic does not exist yet: publishing fails
    client = push_app(dead_letter_topic=dead).test_client()

    def refuse(event):
        raise PermanentError("bad order")

    probe.behaviour = refuse
    response = post(client, envelope())
    assert response.status_code == 500 and response.json["outcome"] == "dead_letter_failed"
    assert response.json["reason"] == "permanent_failure" and "NotFound" in response.json["error"]
    pubsub.publisher.create_topic(request={"name": dead})
    letters = pubsub.pull_subscription("dead-letters", dead)
    again = post(client, envelope())
    assert again.status_code == 200 and again.json["outcome"] == "duplicate"
    assert again.json["dead_lettered"] is True
    [copy] = pubsub.pull(letters, 1)
    assert copy.attributes["runonce_reason"] == "permanent_failure"
    assert copy.attributes["runonce_error"] == "bad order"
    assert probe.count == 1  # the job itself never ran again


def test_a_duplicate_while_the_first_attempt_forwards_waits_and_adds_no_second_copy(
    pubsub, push_app, probe, monkeypatch
):
    """The failure is recorded before its copy is published: a redelivery in between must not
    publish a copy of its own (it is answered 409 and Pub/Sub delivers it again later)."""
    from runonce.events.deadletter import DeadLetters

    forwarding, proceed = threading.Event(), threading.Event()
    forward = DeadLetters.forward

    def slow_forward(self, *args, **kwargs):
        forwarding.set()
        proceed.wait(10)
        return forward(self, *args, **kwargs)

    monkeypatch.setattr(DeadLetters, "forward", slow_forward)
    topic = pubsub.topic("dead")
    letters = pubsub.pull_subscription("dead-letters", topic)
    client = push_app(dead_letter_topic=topic).test_client()

    def refuse(event):
        raise PermanentError("bad order")

    probe.behaviour = refuse
    first: list = []
    worker = threading.Thread(target=lambda: first.append(post(client, envelope())))
    worker.start()
    assert forwarding.wait(10)
    monkeypatch.setattr(DeadLetters, "forward", forward)
    during = post(client, envelope())
    proceed.set()
    worker.join(10)
    after = post(client, envelope())

    assert during.status_code == 409 and during.json["forwarding"] is True
    assert first[0].status_code == 200 and first[0].json["dead_lettered"] is True
    assert after.status_code == 200 and after.json["outcome"] == "duplicate"
    assert len(pubsub.pull(letters, 1)) == 1  # one copy, not two
    assert probe.count == 1


@pytest.mark.parametrize(
    ("body", "field"),
    [
        (b"not json", "body"),
        (b"[1, 2]", "body"),
        ({"subscription": "projects/p/subscriptions/s"}, "message"),
        ({"message": {"publishTime": "2026-11-29T03:00:00Z"}, "subscription": "s"}, "message.messageId"),
        ({"message": {"messageId": "1"}, "subscription": "s"}, "message.publishTime"),
        (
            {"message": {"messageId": "1", "publishTime": "yesterday"}, "subscription": "s"},
            "message.publishTime",
        ),
        ({"message": {"messageId": 1, "publishTime": "2026-11-29T03:00:00Z"}}, "message.messageId"),
        (
            {
                "message": {"messageId": "1", "publishTime": "2026-11-29T03:00:00Z", "data": "%%%"},
                "subscription": "s",
            },
            "message.data",
        ),
        (
            {"message": {"messageId": "1", "publishTime": "2026-11-29T03:00:00Z", "attributes": {"a": 1}}},
            "message.attributes",
        ),
        ({"message": {"messageId": "1", "publishTime": "2026-11-29T03:00:00Z"}}, "subscription"),
        (
            {
                "message": {"messageId": "1", "publishTime": "2026-11-29T03:00:00Z"},
                "subscription": "s",
                "deliveryAttempt": 0,
            },
            "deliveryAttempt",
        ),
    ],
    ids=[
        "not JSON",
        "not an object",
        "no message",
        "no messageId",
        "no publishTime",
        "publishTime not RFC 3339",
        "messageId not a string",
        "data not base64",
        "attribute not a string",
        "no subscription",
        "deliveryAttempt zero",
    ],
)
def test_a_body_that_is_not_a_push_envelope_is_answered_400_naming_the_field(
    push_app, probe, records, body, field
):
    response = post(push_app().test_client(), body)
    assert response.status_code == 400 and response.json["outcome"] == "rejected"
    assert response.json["error"].startswith(f"{field}: ")
    assert probe.count == 0 and records() == {}


@pytest.mark.both_stores
def test_the_real_service_snake_case_fields_are_read_too(store_kind, push_app, probe):
    body = {
        "message": {
            "data": base64.b64encode(b"x").decode(),
            "message_id": "42",
            "publish_time": datetime.now(UTC).isoformat(),
        },
        "subscription": "projects/p/subscriptions/s",
    }
    assert post(push_app().test_client(), body).json["outcome"] == "completed"
    assert probe.events[0].id == "42" and probe.events[0].data == b"x"


def test_no_dead_letter_topic_is_misconfigured_naming_what_to_set(pubsub, tapped_client, collection, probe):
    from .conftest import serve_app

    handler = runonce.deduplicated_event(collection=collection, client=tapped_client)(probe)
    response = post(serve_app(handler).test_client(), envelope())
    assert response.status_code == 500 and response.json["outcome"] == "misconfigured"
    assert "RUNONCE_DEAD_LETTER_TOPIC is not set" in response.json["error"]
    assert probe.count == 0


def test_an_event_job_that_returns_a_generator_is_completed_without_its_result_and_not_run_again(
    push_app, probe, records
):
    def body(event):
        yield "never stored"

    probe.behaviour = body
    client = push_app().test_client()
    first = post(client, envelope())
    assert first.status_code == 200 and first.json["outcome"] == "completed"
    assert first.json["result_stored"] is False and "generator" in first.json["result_dropped"]
    [record] = records().values()
    assert record["status"] == "completed" and record["result_stored"] is False
    again = post(client, envelope())
    assert again.json["outcome"] == "duplicate" and probe.count == 1


@pytest.fixture
def fixed_clock():
    """runonce's clock stands at 2026-11-29T03:10:00.2Z for the test."""
    now = datetime(2026, 11, 29, 3, 10, 0, 200000, tzinfo=UTC)
    runonce.set_clock(lambda: now)
    yield now
    runonce.set_clock(None)


def test_an_event_just_younger_than_the_maximum_age_runs_its_fraction_of_a_second_counts(
    push_app, probe, fixed_clock
):
    body = envelope()
    body["message"]["publishTime"] = "2026-11-29T03:00:00.400Z"  # 599.8 s before the clock
    response = post(push_app(max_event_age=600).test_client(), body)
    assert response.json["outcome"] == "completed" and probe.count == 1
    assert probe.events[0].time == datetime(2026, 11, 29, 3, 0, 0, 400000, tzinfo=UTC)


@pytest.mark.parametrize(
    ("text", "nanosecond", "utc"),
    [
        ("2026-11-29T03:05:00.123456789Z", 123456789, "2026-11-29T03:05:00.123456789Z"),
        ("2026-11-29t03:05:00.5z", 500000000, "2026-11-29T03:05:00.500000000Z"),
        ("2026-11-29T04:05:00.25+01:00", 250000000, "2026-11-29T03:05:00.250000000Z"),
        ("2026-11-29T03:05:00.123456789987Z", 123456789, "2026-11-29T03:05:00.123456789Z"),
        ("2026-11-29T03:05:00Z", 0, "2026-11-29T03:05:00Z"),
    ],
    ids=["nanoseconds", "lower case t and z", "offset", "twelve digits", "whole seconds"],
)
def test_every_rfc_3339_publish_time_is_read_to_the_nanosecond(
    push_app, probe, fixed_clock, text, nanosecond, utc
):
    body = envelope()
    body["message"]["publishTime"] = text
    assert post(push_app().test_client(), body).json["outcome"] == "completed"
    [event] = probe.events
    assert event.time.nanosecond == nanosecond and event.time.microsecond == nanosecond // 1000
    assert event.time.tzinfo is UTC and event.time.strftime("%Y-%m-%dT%H:%M:%S") == utc[:19]


@pytest.mark.parametrize(
    "text",
    ["2026-11-29T03:05:00", "2026-11-29 03:05:00Z", "2026-11-29T03:05:00.Z", "2026-11-29T03:05:00,5Z"],
    ids=["no offset", "space", "empty fraction", "comma"],
)
def test_a_publish_time_that_is_not_rfc_3339_is_rejected_naming_it(push_app, probe, fixed_clock, text):
    body = envelope()
    body["message"]["publishTime"] = text
    response = post(push_app().test_client(), body)
    assert response.status_code == 400 and response.json["error"].startswith("message.publishTime: ")
    assert probe.count == 0


def test_a_takeover_past_the_maximum_age_runs_the_body_again_and_dead_letters_nothing(
    pubsub, push_app, probe, records
):
    """The first attempt claims and starts the body, then dies (here: hangs until the end); its
    lease expires after the event has passed the maximum age. The body did start, so its effect may
    exist: the takeover runs it again (the effect is keyed by the run key) instead of recording
    `too_old` ("not run") and publishing a copy whose replay would repeat the effect."""
    dead = pubsub.topic("dead")
    letters = pubsub.pull_subscription("dead-letters", dead)
    now = [datetime.now(UTC)]
    runonce.set_clock(lambda: now[0])
    try:
        client = push_app(dead_letter_topic=dead, lease=60, max_event_age=120).test_client()
        started, dead_instance = threading.Event(), threading.Event()
        probe.behaviour = lambda event: (started.set(), dead_instance.wait(30), "first")[-1]
        first = threading.Thread(target=post, args=(client, envelope()))
        first.start()
        assert started.wait(10)
        now[0] += timedelta(seconds=600)  # past the lease and the maximum age
        probe.behaviour = lambda event: "taken over"
        again = post(client, envelope())
    finally:
        runonce.set_clock(None)
        dead_instance.set()
        first.join(10)
    assert again.status_code == 200 and again.json["outcome"] == "completed"
    assert again.json["result"] == "taken over" and again.json["attempt"] == 2
    [record] = records().values()
    assert record["status"] == "completed" and "dead_lettered_at" not in record
    assert pubsub.pull(letters, 0, timeout=1.5) == [] and probe.count == 2


def test_a_permanent_failure_whose_run_was_taken_over_is_not_acked_and_not_dead_lettered(
    pubsub, push_app, probe, records
):
    """The first attempt outlives its lease; a redelivery takes the event over and completes it.
    When the first then fails permanently its failure write finds the run taken over: the event
    has its one effect, so a copy would be a second ending, and an ack could leave a run still in
    progress elsewhere with no delivery left. It is answered 409 and nothing is published."""
    dead = pubsub.topic("dead")
    letters = pubsub.pull_subscription("dead-letters", dead)
    now = [datetime.now(UTC)]
    runonce.set_clock(lambda: now[0])
    inside, finish = threading.Event(), threading.Event()
    first: list = []
    try:
        client = push_app(dead_letter_topic=dead, lease=60).test_client()

        def slow_then_refuse(event):
            inside.set()
            finish.wait(30)
            raise PermanentError("refused, too late")

        probe.behaviour = slow_then_refuse
        worker = threading.Thread(target=lambda: first.append(post(client, envelope())))
        worker.start()
        assert inside.wait(10)
        now[0] += timedelta(seconds=61)  # the first attempt's lease has expired
        probe.behaviour = lambda event: "taken over and done"
        second = post(client, envelope())
    finally:
        finish.set()
        worker.join(10)
        runonce.set_clock(None)
    assert second.json["outcome"] == "completed"
    assert first[0].status_code == 409 and first[0].json["recorded"] is False
    [record] = records().values()
    assert record["status"] == "completed" and "dead_lettered_at" not in record
    assert pubsub.pull(letters, 0, timeout=1.5) == []


def test_the_push_run_key_is_the_one_deployed_ledgers_hold(push_app, records, monkeypatch):
    import hashlib
    import json

    monkeypatch.setenv("K_SERVICE", "orders-function")  # a consumer never joins a push key
    post(push_app().test_client(), envelope())
    parts = ["runonce/v1", "pubsub", "projects/runonce-local/subscriptions/orders-push", "1001"]
    encoded = json.dumps(parts, ensure_ascii=False, separators=(",", ":")).encode()
    assert list(records()) == [hashlib.sha256(encoded).hexdigest()]
