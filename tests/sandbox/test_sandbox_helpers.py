"""Offline: the pieces the sandbox tests are built from, on the real emulators where they talk to
a service (not marked sandbox).

- `wait_for`, on a fake clock;
- the dead-letter reading: copies forwarded by runonce's own `DeadLetters` to the Pub/Sub
  emulator, pulled over the same REST calls the sandbox makes, read back with their reason;
- the sandbox's CloudEvent function, called with CloudEvents shaped as Eventarc sends them, on
  the Firestore emulator: one outbox entry per event, found by the lookups the tests use;
- the outbox names the tests read are the ones the functions write.
"""

from __future__ import annotations

import ast
import base64
import importlib.util
import sys
import uuid
from datetime import UTC, datetime
from pathlib import Path

import pytest
import requests

from runonce.contract import DeadLetterReason
from runonce.core.event import Event
from runonce.events.deadletter import DeadLetters, publisher_client
from stacks.team import FUNCTIONS_DIR, Team
from tests.conftest import PROJECT
from tests.sandbox import teams
from tests.sandbox.cloud import PubSub
from tests.sandbox.effects import message_entries, uploaded_object_entries
from tests.sandbox.waiting import wait_for


class FakeClock:
    """A monotonic clock that only moves when slept on, recording every sleep."""

    def __init__(self) -> None:
        self.now = 100.0
        self.sleeps: list[float] = []

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds


def test_wait_for_returns_at_once_when_the_first_read_is_done():
    clock = FakeClock()
    assert wait_for(lambda: 7, lambda value: value == 7, within=60, clock=clock, sleep=clock.sleep) == 7
    assert clock.sleeps == []


def test_wait_for_reads_every_interval_until_done():
    clock, values = FakeClock(), iter([0, 0, 3, 9])
    value = wait_for(
        lambda: next(values), lambda seen: seen > 1, within=60, every=10, clock=clock, sleep=clock.sleep
    )
    assert value == 3 and clock.sleeps == [10, 10]


def test_wait_for_gives_the_last_value_at_the_deadline_without_sleeping_past_it():
    clock, reads = FakeClock(), []

    def read() -> int:
        reads.append(clock.now)
        return 0

    assert wait_for(read, bool, within=25, every=10, clock=clock, sleep=clock.sleep) == 0
    assert clock.sleeps == [10, 10, 5] and reads == [100, 110, 120, 125]


@pytest.fixture
def dead_letter_topic(pubsub_emulator):
    """A topic and its pull subscription on the emulator, over REST; (session, base, topic, sub)."""
    session, base = requests.Session(), f"http://{pubsub_emulator.host}/v1"
    suffix = uuid.uuid4().hex[:8]
    topic = f"projects/{PROJECT}/topics/sandbox-dead-{suffix}"
    subscription = f"projects/{PROJECT}/subscriptions/sandbox-dead-{suffix}"
    assert session.put(f"{base}/{topic}", timeout=30).ok
    assert session.put(f"{base}/{subscription}", json={"topic": topic}, timeout=30).ok
    return PubSub(session, base), topic, subscription


@pytest.mark.parametrize("reason", list(DeadLetterReason))
def test_a_copy_forwarded_by_runonce_is_read_back_with_its_reason(dead_letter_topic, reason):
    pubsub, topic, subscription = dead_letter_topic
    original = Event(
        id="message-1",
        source="projects/p/subscriptions/orders-push",
        time=datetime.now(UTC),
        attributes={"sandbox_token": "token-1"},
        data=b'{"order": 1}',
    )
    forwarded = DeadLetters(topic, publisher_client()).forward(original, reason, "key-1", 2, "it failed")

    letters = wait_for(lambda: pubsub.take_dead_letters(subscription), bool, within=30, every=1)
    [letter] = letters
    assert letter.copy.id == forwarded.message_id and letter.copy.source == subscription
    assert (letter.reason, letter.run_key, letter.original_id) == (reason.value, "key-1", "message-1")
    assert letter.original.data == b'{"order": 1}' and letter.original.attributes == {
        "sandbox_token": "token-1"
    }
    assert not letter.by_pubsub
    assert pubsub.take_dead_letters(subscription) == []  # acknowledged when taken


def test_a_dead_letter_pubsub_moved_itself_has_no_runonce_reason(dead_letter_topic):
    pubsub, topic, subscription = dead_letter_topic
    # Pub/Sub's own copy keeps the message and adds CloudPubSubDeadLetterSource* attributes.
    pubsub.publish(topic, b"{}", {"CloudPubSubDeadLetterSourceSubscription": "orders-push"})

    [letter] = wait_for(lambda: pubsub.take_dead_letters(subscription), bool, within=30, every=1)
    assert letter.by_pubsub and letter.reason is None and letter.run_key is None


def load_main(folder: Path, name: str):
    """A function folder's main.py as a module of its own."""
    spec = importlib.util.spec_from_file_location(name, folder / "main.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def cloud_event_function(firestore_emulator, pubsub_emulator, monkeypatch):
    """The sandbox's CloudEvent function, configured as the stack configures it, on the emulators;
    (module, team) with the team naming the emulator's project and default database."""
    monkeypatch.setenv("RUNONCE_COLLECTION", f"sandbox_runs_{uuid.uuid4().hex[:8]}")
    monkeypatch.setenv("RUNONCE_DEAD_LETTER_TOPIC", f"projects/{PROJECT}/topics/sandbox-unused")
    monkeypatch.setenv("RUNONCE_MAX_EVENT_AGE_SECONDS", "3600")
    module = load_main(teams.CLOUD_EVENT_FOLDER, f"sandbox_cloud_event_{uuid.uuid4().hex[:8]}")
    team = Team(name="local", project=PROJECT, region="local", jobs=[], database="(default)")
    return module, team


def cloud_event(event_type: str, source: str, data):
    """A CloudEvent as Eventarc delivers it, with a new id."""
    from cloudevents.http import CloudEvent

    attributes = {
        "type": event_type,
        "source": source,
        "id": uuid.uuid4().hex,
        "time": datetime.now(UTC).isoformat().replace("+00:00", "Z"),
    }
    return CloudEvent(attributes, data)


def test_the_cloud_event_function_stores_an_upload_once_and_the_lookup_finds_it(cloud_event_function):
    module, team = cloud_event_function
    name = f"sandbox/{uuid.uuid4().hex}.txt"
    event = cloud_event(
        "google.cloud.storage.object.v1.finalized",
        "//storage.googleapis.com/projects/_/buckets/uploads",
        {"bucket": "uploads", "name": name, "size": "5"},
    )
    first, again = module.handle(event), module.handle(event)  # Eventarc delivered it twice

    assert first["outcome"] == "completed" and again["outcome"] == "duplicate"
    [entry] = uploaded_object_entries(team, name)
    assert entry["event_id"] == event["id"]


def test_the_cloud_event_function_stores_a_message_once_and_the_lookup_finds_it(cloud_event_function):
    module, team = cloud_event_function
    data = uuid.uuid4().hex
    envelope = {
        "message": {
            "data": base64.b64encode(data.encode()).decode(),
            "messageId": "m-1",
            "publishTime": datetime.now(UTC).isoformat().replace("+00:00", "Z"),
        },
        "subscription": "projects/p/subscriptions/eventarc-europe-west1-messages",
    }
    event = cloud_event(
        "google.cloud.pubsub.topic.v1.messagePublished", "//pubsub.googleapis.com/topic", envelope
    )
    module.handle(event)
    module.handle(event)

    assert len(message_entries(team, data)) == 1


@pytest.mark.parametrize(
    ("folder", "outbox"),
    [
        (FUNCTIONS_DIR / teams.EVENTS_SOURCE, teams.EVENTS_OUTBOX),
        (teams.CLOUD_EVENT_FOLDER, teams.CLOUD_EVENT_OUTBOX),
    ],
)
def test_the_outboxes_the_tests_read_are_the_ones_the_functions_write(folder, outbox):
    tree = ast.parse((folder / "main.py").read_text())
    [written] = [
        node.value.value
        for node in tree.body
        if isinstance(node, ast.Assign)
        and [getattr(target, "id", None) for target in node.targets] == ["OUTBOX"]
        and isinstance(node.value, ast.Constant)
    ]
    assert written == outbox
