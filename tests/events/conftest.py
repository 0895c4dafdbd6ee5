"""Fixtures for the event tests: a real Pub/Sub emulator (next to the real Firestore emulator),
topics and subscriptions on it, push envelopes shaped as the emulator sends them, a decorated job
served by Flask (test client, or a real HTTP server the emulator pushes to)."""

from __future__ import annotations

import base64
import json
import threading
import time
import uuid
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import flask
import pytest
from werkzeug.serving import make_server

import runonce
from emulator.process import free_port
from emulator.wire import TappedClient, WireTap
from runonce import _clock as clock
from runonce.core.event import EventRun, load_event_settings
from runonce.core.settings import DEFAULT_RETENTION_SECONDS, load_settings
from runonce.events import adapter
from runonce.events.adapter import EventSetup
from runonce.events.deadletter import DeadLetters
from runonce.store.connection import Setup
from runonce.store.memory import MemoryStore
from tests.conftest import PROJECT


class PubSub:
    """Topics and subscriptions on the emulator, named per test, and a way to read them."""

    def __init__(self):
        import os

        import grpc
        from google.cloud import pubsub_v1
        from google.pubsub_v1.services.subscriber.transports import SubscriberGrpcTransport

        self.publisher = pubsub_v1.PublisherClient()
        # gRPC takes 4 MiB a message by default; a dead-letter copy may hold 10 MB.
        channel = grpc.insecure_channel(
            os.environ["PUBSUB_EMULATOR_HOST"], options=[("grpc.max_receive_message_length", -1)]
        )
        self.subscriber = pubsub_v1.SubscriberClient(transport=SubscriberGrpcTransport(channel=channel))
        self.suffix = uuid.uuid4().hex[:8]

    def topic_path(self, name: str) -> str:
        return self.publisher.topic_path(PROJECT, f"{name}-{self.suffix}")

    def subscription_path(self, name: str) -> str:
        return self.subscriber.subscription_path(PROJECT, f"{name}-{self.suffix}")

    def topic(self, name: str) -> str:
        """Create a topic; its full path."""
        path = self.topic_path(name)
        self.publisher.create_topic(request={"name": path})
        return path

    def pull_subscription(self, name: str, topic: str) -> str:
        path = self.subscription_path(name)
        self.subscriber.create_subscription(request={"name": path, "topic": topic})
        return path

    def push_subscription(self, name: str, topic: str, endpoint: str) -> str:
        """A push subscription retrying nacks after 1-2 s (the emulator honours the retry policy)."""
        path = self.subscription_path(name)
        self.subscriber.create_subscription(
            request={
                "name": path,
                "topic": topic,
                "push_config": {"push_endpoint": endpoint},
                "ack_deadline_seconds": 10,
                "retry_policy": {"minimum_backoff": {"seconds": 1}, "maximum_backoff": {"seconds": 2}},
            }
        )
        return path

    def publish(self, topic: str, data: bytes, **attributes: str) -> str:
        return self.publisher.publish(topic, data, **attributes).result(timeout=30)

    def pull(self, subscription: str, expected: int, timeout: float = 30.0) -> list:
        """Pull and ack until `expected` messages came, then a little longer for any extra one."""
        received: list = []
        deadline = time.monotonic() + timeout
        settle = None
        while time.monotonic() < deadline:
            with warnings.catch_warnings():  # the emulator still honours the deprecated flag
                warnings.simplefilter("ignore", DeprecationWarning)
                response = self.subscriber.pull(
                    request={"subscription": subscription, "max_messages": 10, "return_immediately": True},
                    timeout=10,
                )
            if response.received_messages:
                received += [item.message for item in response.received_messages]
                self.subscriber.acknowledge(
                    request={
                        "subscription": subscription,
                        "ack_ids": [item.ack_id for item in response.received_messages],
                    }
                )
            if len(received) >= expected and settle is None:
                settle = time.monotonic() + 1.0
            if settle is not None and time.monotonic() >= settle:
                break
            time.sleep(0.2)
        return received


@pytest.fixture
def pubsub(pubsub_emulator, firestore_emulator) -> PubSub:
    return PubSub()


class EventProbe:
    """The job body: records every execution (event and current run), then does what the test asks."""

    def __init__(self):
        self.events: list[runonce.Event] = []
        self.runs: list[runonce.Run | EventRun] = []
        self.behaviour: Callable[[runonce.Event], object] = lambda event: {"seen": event.id}
        self._lock = threading.Lock()

    def __call__(self, event):
        with self._lock:
            self.events.append(event)
            self.runs.append(runonce.current_run())
        return self.behaviour(event)

    @property
    def count(self) -> int:
        return len(self.events)


@pytest.fixture
def probe() -> EventProbe:
    return EventProbe()


@pytest.fixture
def collection() -> str:
    return f"events_{uuid.uuid4().hex[:12]}"


@pytest.fixture
def tap() -> WireTap:
    return WireTap()


@pytest.fixture
def tapped_client(request, store_kind, tap):
    if store_kind == "memory":
        pytest.fail("this test reaches the Firestore client itself: it cannot run on the in-memory store")
    request.getfixturevalue("firestore_emulator")
    return TappedClient(tap, project=PROJECT)


class RecordedDeadLetters(DeadLetters):
    """The dead-letter forwarder of the fast tier: keeps each copy it is given instead of publishing."""

    def __init__(self, topic: str, copies: list[Copy]):
        super().__init__(topic, None)
        self._copies = copies

    def _publish(self, data: bytes, attributes: dict[str, str]) -> str:
        copy = Copy(data, dict(attributes), f"recorded-{len(self._copies) + 1}")
        self._copies.append(copy)
        return copy.message_id


@dataclass(frozen=True)
class Copy:
    """A dead-letter copy as a test reads it back: what Pub/Sub would deliver of it."""

    data: bytes
    attributes: dict[str, str]
    message_id: str


class MemoryEventConnection:
    """What `runonce.events.adapter.EventConnection` gives an event job, on the in-memory store
    and with the copies kept in process (the fast tier)."""

    def __init__(self, store: MemoryStore, overrides: dict, copies: list[Copy]):
        self._store = store
        self._overrides = overrides
        self._copies = copies

    def get(self) -> EventSetup:
        """The settings from the decorator's options (a bad one raises ConfigError), the store."""
        base = load_settings(self._overrides)
        settings = load_event_settings(base, self._overrides, project=PROJECT)
        setup = Setup(base, self._store, PROJECT)
        return EventSetup(setup, settings, RecordedDeadLetters(settings.dead_letter_topic, self._copies))


@pytest.fixture
def memory_store(store_kind):
    """The in-memory store of a test run on it (None on the emulator), on runonce's clock."""
    if store_kind != "memory":
        return None
    return MemoryStore(timedelta(seconds=60), timedelta(seconds=DEFAULT_RETENTION_SECONDS), clock.now)


@pytest.fixture
def records(request, store_kind, memory_store, collection):
    """Every record of this test's collection, by run key (by claim order on the in-memory store)."""
    if store_kind == "memory":
        return lambda: dict(enumerate(memory_store.records()))
    client = request.getfixturevalue("tapped_client")

    def read() -> dict[str, dict]:
        return {snap.id: snap.to_dict() for snap in client.collection(collection).stream()}

    return read


def envelope(
    data: bytes = b'{"order": 7}',
    message_id: str = "1001",
    subscription: str = "projects/runonce-local/subscriptions/orders-push",
    attributes: dict[str, str] | None = None,
    publish_time: datetime | None = None,
    **extra,
) -> dict:
    """A push body as Pub/Sub sends it (publishTime now unless given)."""
    published = (publish_time or datetime.now(UTC)).isoformat().replace("+00:00", "Z")
    return {
        "message": {
            "data": base64.b64encode(data).decode(),
            "attributes": attributes if attributes is not None else {"kind": "order"},
            "messageId": message_id,
            "publishTime": published,
        },
        "subscription": subscription,
        **extra,
    }


def post(client, body) -> flask.Response:
    payload = body if isinstance(body, bytes | str) else json.dumps(body)
    return client.post("/", data=payload, content_type="application/json")


def serve_app(handler) -> flask.Flask:
    """A Flask app that calls `handler` with the request, as functions-framework's http does."""
    app = flask.Flask(f"runonce-events-{uuid.uuid4().hex[:6]}")
    app.add_url_rule("/", "handle", lambda: handler(flask.request._get_current_object()), methods=["POST"])
    return app


class DeadLetterTopic:
    """A dead-letter topic and what reached it: pulled from a subscription on the Pub/Sub
    emulator, or the copies kept in process on the in-memory store's fast run."""

    def __init__(self, name: str, read: Callable[[int, float], list]):
        self.name = name
        self._read = read

    def copies(self, expected: int, timeout: float = 30.0) -> list:
        """The copies published since the last look (as a pull acknowledges them), waiting up to
        `timeout` s for `expected` of them."""
        return self._read(expected, timeout)


@pytest.fixture
def recorded_copies() -> list[Copy]:
    return []


@pytest.fixture
def dead_letter_topic(request, store_kind, recorded_copies) -> DeadLetterTopic:
    if store_kind == "memory":
        name = f"projects/{PROJECT}/topics/dead-{uuid.uuid4().hex[:8]}"

        def take(expected: int, timeout: float) -> list:
            taken = list(recorded_copies)
            recorded_copies.clear()
            return taken

        return DeadLetterTopic(name, take)
    pubsub = request.getfixturevalue("pubsub")
    name = pubsub.topic("dead")
    letters = pubsub.pull_subscription("dead-letters", name)
    return DeadLetterTopic(name, lambda expected, timeout: pubsub.pull(letters, expected, timeout=timeout))


@pytest.fixture
def event_handler(request, store_kind, memory_store, recorded_copies, collection, probe, monkeypatch):
    """Build the probe under @deduplicated_event, dead-lettering to a new topic: on the emulators,
    or (a `both_stores` test's fast run) on the in-memory store with the copies kept in process.
    A CloudEvent function is this handler itself; a push endpoint serves it (`push_app`)."""
    if store_kind == "memory":
        monkeypatch.setattr(
            adapter,
            "EventConnection",
            lambda overrides, client: MemoryEventConnection(memory_store, overrides, recorded_copies),
        )
        client, new_topic = None, lambda: f"projects/{PROJECT}/topics/dead-{uuid.uuid4().hex[:8]}"
    else:
        client, pubsub = request.getfixturevalue("tapped_client"), request.getfixturevalue("pubsub")
        new_topic = lambda: pubsub.topic("dead")  # noqa: E731

    def build(dead_letter_topic: str | None = None, **options):
        options.setdefault("lease", 60)
        topic = dead_letter_topic or new_topic()
        return runonce.deduplicated_event(
            collection=collection, client=client, dead_letter_topic=topic, **options
        )(probe)

    return build


@pytest.fixture
def push_app(event_handler):
    """Build the app serving the probe under @deduplicated_event (see `event_handler`)."""

    def build(dead_letter_topic: str | None = None, **options) -> flask.Flask:
        return serve_app(event_handler(dead_letter_topic, **options))

    return build


class Server:
    """A real HTTP server on a free port, in a thread, so the emulator can push to it."""

    def __init__(self, app: flask.Flask):
        self.port = free_port()
        self._server = make_server("127.0.0.1", self.port, app, threaded=True)
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/"

    def stop(self) -> None:
        self._server.shutdown()
        self._thread.join(timeout=10)


@pytest.fixture
def serve() -> Iterator[Callable[[flask.Flask], Server]]:
    started: list[Server] = []

    def start(app: flask.Flask) -> Server:
        server = Server(app)
        started.append(server)
        return server

    yield start
    for server in started:
        server.stop()


def wait_for(condition: Callable[[], object], timeout: float = 30.0) -> None:
    """Poll until `condition()` is true; fail the test after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return
        time.sleep(0.1)
    raise AssertionError(f"condition not met within {timeout} s")
