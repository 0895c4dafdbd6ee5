"""@deduplicated_event behind a REAL push subscription of the Pub/Sub emulator: the emulator
delivers to a local HTTP server, acks on our 200, redelivers on our 5xx (after its 1-2 s retry
backoff), and the dead-letter copies are pulled back from a subscription on the dead-letter topic.
"""

from __future__ import annotations

import threading
from datetime import UTC, datetime, timedelta

import flask
import pytest

import runonce
from runonce import PermanentError

from .conftest import wait_for

# Longer than the subscription's maximum retry backoff: a redelivery would have come by then.
QUIET_SECONDS = 3.0


class Endpoint:
    """The pushed-to endpoint: the decorated probe, every delivery it answered, and an optional
    "lost answer" (the job's answer replaced by a 500, as if the 200 never reached Pub/Sub)."""

    def __init__(self, handler):
        self.handler = handler
        self.answers: list[tuple[str, int, str]] = []  # (messageId, status, outcome)
        self.lose_first_answers = False
        self._lock = threading.Lock()

    def view(self):
        request = flask.request._get_current_object()
        message_id = (request.get_json(silent=True) or {}).get("message", {}).get("messageId", "?")
        body, status = self.handler(request)
        with self._lock:
            first = all(mid != message_id for mid, _, _ in self.answers)
            self.answers.append((message_id, status, body["outcome"]))
            if self.lose_first_answers and first:
                return {"lost": True}, 500
        return body, status

    def outcomes(self, message_id: str) -> list[str]:
        with self._lock:
            return [outcome for mid, _, outcome in self.answers if mid == message_id]


@pytest.fixture
def pushed(pubsub, serve, tapped_client, collection, probe):
    """Wire topic -> push subscription -> server -> @deduplicated_event(probe); returns a setup."""

    def build(dead_letter_topic: str | None = None, **options):
        options.setdefault("lease", 60)
        dead = dead_letter_topic or pubsub.topic("dead")
        handler = runonce.deduplicated_event(
            collection=collection, client=tapped_client, dead_letter_topic=dead, **options
        )(probe)
        endpoint = Endpoint(handler)
        app = flask.Flask(f"pushed-{pubsub.suffix}")
        app.add_url_rule("/", "push", endpoint.view, methods=["POST"])
        server = serve(app)
        topic = pubsub.topic("orders")
        subscription = pubsub.push_subscription("orders-push", topic, server.url)
        return topic, subscription, endpoint

    return build


def test_a_pushed_message_runs_once_and_is_acked_once(pubsub, pushed, probe):
    topic, subscription, endpoint = pushed()
    message_id = pubsub.publish(topic, b'{"order": 1}', kind="order")
    wait_for(lambda: endpoint.outcomes(message_id))
    assert endpoint.outcomes(message_id) == ["completed"]
    [event] = probe.events
    assert event.id == message_id and event.source == subscription
    assert event.json() == {"order": 1} and event.attributes == {"kind": "order"}
    threading.Event().wait(QUIET_SECONDS)
    assert endpoint.outcomes(message_id) == ["completed"]  # acked: never delivered again


def test_a_redelivery_after_a_lost_ack_does_not_run_the_job_again(pubsub, pushed, probe, records):
    topic, _, endpoint = pushed()
    endpoint.lose_first_answers = True  # every message's first answer is lost: each is redelivered
    ids = [pubsub.publish(topic, f"m{n}".encode()) for n in range(5)]
    wait_for(lambda: all(len(endpoint.outcomes(mid)) == 2 for mid in ids))
    for mid in ids:
        assert endpoint.outcomes(mid) == ["completed", "duplicate"]
    assert sorted(event.id for event in probe.events) == sorted(ids)  # one body per message
    assert {record["status"] for record in records().values()} == {"completed"} and len(records()) == 5


def test_a_message_whose_job_raised_is_redelivered_and_runs_to_completion(pubsub, pushed, probe):
    topic, _, endpoint = pushed()
    failures = iter([RuntimeError("flaky downstream")])

    def flaky(event):
        for exc in failures:
            raise exc
        return "done"

    probe.behaviour = flaky
    message_id = pubsub.publish(topic, b"x")
    wait_for(lambda: "completed" in endpoint.outcomes(message_id))
    assert endpoint.outcomes(message_id) == ["retry", "completed"] and probe.count == 2


def test_a_permanent_failure_reaches_the_dead_letter_topic_with_runonce_attributes(pubsub, pushed, probe):
    dead = pubsub.topic("dead")
    letters = pubsub.pull_subscription("dead-letters", dead)
    topic, subscription, endpoint = pushed(dead_letter_topic=dead)

    def refuse(event):
        raise PermanentError(f"order {event.json()['order']} is unknown")

    probe.behaviour = refuse
    message_id = pubsub.publish(topic, b'{"order": 9}', tenant="acme")
    [copy] = pubsub.pull(letters, 1)
    assert copy.data == b'{"order": 9}' and copy.attributes["tenant"] == "acme"
    assert copy.attributes["runonce_reason"] == "permanent_failure"
    assert copy.attributes["runonce_error"] == "order 9 is unknown"
    assert copy.attributes["runonce_event_id"] == message_id
    assert copy.attributes["runonce_origin"] == subscription
    assert copy.attributes["runonce_attempt"] == "1" and len(copy.attributes["runonce_run_key"]) == 64
    threading.Event().wait(QUIET_SECONDS)
    assert endpoint.outcomes(message_id) == ["failed"] and probe.count == 1


def test_a_message_older_than_the_maximum_age_is_dead_lettered_not_run(pubsub, pushed, probe):
    dead = pubsub.topic("dead")
    letters = pubsub.pull_subscription("dead-letters", dead)
    topic, _, endpoint = pushed(dead_letter_topic=dead, max_event_age=3600)
    # The function's clock is two hours ahead: every message it sees is two hours old.
    runonce.set_clock(lambda: datetime.now(UTC) + timedelta(hours=2))
    try:
        message_id = pubsub.publish(topic, b"stale")
        [copy] = pubsub.pull(letters, 1)
    finally:
        runonce.set_clock(None)
    assert copy.data == b"stale" and copy.attributes["runonce_reason"] == "too_old"
    assert endpoint.outcomes(message_id) == ["too_old"] and probe.count == 0


def test_a_failed_forwarding_keeps_the_message_until_the_dead_letter_topic_takes_it(pubsub, pushed, probe):
    dead = pubsub.topic_path("dead-later")  # not created yet: forwarding fails
    topic, _, endpoint = pushed(dead_letter_topic=dead)

    def refuse(event):
        raise PermanentError("cannot be processed")

    probe.behaviour = refuse
    message_id = pubsub.publish(topic, b"precious")
    wait_for(lambda: len(endpoint.outcomes(message_id)) >= 2)  # answered 500, so delivered again
    assert set(endpoint.outcomes(message_id)) == {"dead_letter_failed"}
    pubsub.publisher.create_topic(request={"name": dead})
    letters = pubsub.pull_subscription("dead-letters", dead)
    wait_for(lambda: endpoint.outcomes(message_id)[-1] == "duplicate")
    [copy] = pubsub.pull(letters, 1)
    assert copy.data == b"precious" and copy.attributes["runonce_reason"] == "permanent_failure"
    assert probe.count == 1  # the job ran once; only the forwarding was repeated
