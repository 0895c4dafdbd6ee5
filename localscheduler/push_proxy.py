"""The network between the Pub/Sub emulator and a function's local instances, with its faults.

The emulator pushes to this proxy (one endpoint per subscription); the proxy hands each push to an
idle instance of the pool, as Cloud Run's front end would, and passes the answer back. Two faults
live here because they happen outside the function: a **lost ack** (the function answered 200,
but Pub/Sub sees a failure and redelivers: the proxy answers 500 instead, on the message's first
delivery that the function acknowledged) and a **late arrival** (no delivery of the message gets
through before `hold_seconds` after its publishTime, as behind a backlog or an outage, so the
function sees it older than its maximum event age; the held deliveries of one message then pass
one at a time, see `_hold`). An instance that dies mid-request is answered
502, as Cloud Run answers a crashed request. Every push is written to the journal.
"""

from __future__ import annotations

import contextlib
import json
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime

import requests
from werkzeug.serving import BaseWSGIServer, WSGIRequestHandler, make_server
from werkzeug.wrappers import Request, Response

from emulator.process import free_port

from .instances import InstancePool

LOSE_ACK_ATTRIBUTE = "demo_lose_ack"
HOLD_ATTRIBUTE = "demo_hold_seconds"
# Longer than any job's work: a push the instance never answers is a dead instance.
FORWARD_TIMEOUT_SECONDS = 120.0


class _QuietHandler(WSGIRequestHandler):
    """Werkzeug's handler without its line per request: the journal keeps the pushes."""

    def log_request(self, code: int | str = "-", size: int | str = "-") -> None:
        """Log nothing."""


@dataclass(frozen=True)
class Push:
    """One push the emulator made, and what it was answered."""

    message_id: str
    subscription: str
    status: int
    outcome: str
    """The function's `outcome`, `lost_ack`, `instance_died`, or `no_instance`."""
    started: float
    ended: float


@dataclass
class PushJournal:
    """Every push, in the order they were answered; thread-safe."""

    pushes: list[Push] = field(default_factory=list)
    in_flight: int = 0
    last_activity: float = field(default_factory=time.monotonic)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def begin(self) -> None:
        """A push arrived."""
        with self._lock:
            self.in_flight += 1
            self.last_activity = time.monotonic()

    def end(self, push: Push) -> None:
        """A push was answered."""
        with self._lock:
            self.in_flight -= 1
            self.last_activity = time.monotonic()
            self.pushes.append(push)

    def quiet_for(self) -> float:
        """Seconds since the last push arrived or was answered; 0 while one is open."""
        with self._lock:
            return 0.0 if self.in_flight else time.monotonic() - self.last_activity

    def snapshot(self) -> list[Push]:
        """The pushes answered so far."""
        with self._lock:
            return list(self.pushes)


class PushProxy:
    """An HTTP endpoint in front of an instance pool; `url` is the push endpoint."""

    def __init__(self, pool: InstancePool, journal: PushJournal):
        self.pool = pool
        self.journal = journal
        self.port = free_port()
        self._lost: set[str] = set()
        self._held: dict[str, threading.Lock] = {}
        self._lock = threading.Lock()
        self._server: BaseWSGIServer = make_server(
            "127.0.0.1", self.port, self._app, threaded=True, request_handler=_QuietHandler
        )
        self._thread = threading.Thread(
            target=self._server.serve_forever, name=f"proxy-{self.port}", daemon=True
        )

    @property
    def url(self) -> str:
        """Where the emulator pushes."""
        return f"http://127.0.0.1:{self.port}/"

    def start(self) -> PushProxy:
        """Serve in a thread."""
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving; safe to call twice."""
        self._server.shutdown()
        self._thread.join(timeout=10)

    def _app(self, environ, start_response):
        request = Request(environ)
        body = request.get_data()
        self.journal.begin()
        started = time.monotonic()
        message_id, subscription, status, outcome, answer = "?", "?", 500, "bad_push", b""
        try:
            envelope = json.loads(body)
            message = envelope["message"]
            message_id, subscription = message["messageId"], envelope["subscription"]
            attributes = message.get("attributes") or {}
            with self._hold(message, attributes):
                status, outcome, answer = self._forward(body)
            if status == 200 and attributes.get(LOSE_ACK_ATTRIBUTE) and self._lose_first(message_id):
                status, outcome, answer = 500, "lost_ack", b'{"lost": true}'
        finally:
            self.journal.end(Push(message_id, subscription, status, outcome, started, time.monotonic()))
        return Response(answer, status=status, content_type="application/json")(environ, start_response)

    @contextlib.contextmanager
    def _hold(self, message: dict, attributes: dict) -> Iterator[None]:
        """Hold a late message's delivery until publishTime + hold, then let its deliveries
        through one at a time. The emulator pushes a held message again while the first push is
        open; released together, the two would reach runonce at once, and a duplicate that finds
        the event failed but not yet marked dead-lettered forwards a second dead-letter copy
        (a race in runonce.events, reported on issue 9)."""
        hold = float(attributes.get(HOLD_ATTRIBUTE, 0))
        if hold <= 0:
            yield
            return
        with self._lock:
            one_at_a_time = self._held.setdefault(message["messageId"], threading.Lock())
        published = datetime.fromisoformat(message["publishTime"].replace("Z", "+00:00"))
        time.sleep(max(0.0, published.timestamp() + hold - datetime.now(UTC).timestamp()))
        with one_at_a_time:
            yield

    def _forward(self, body: bytes) -> tuple[int, str, bytes]:
        with self.pool.acquire(timeout=FORWARD_TIMEOUT_SECONDS) as instance:
            if instance is None:
                return 503, "no_instance", b"{}"
            process = instance.process
            try:
                with requests.Session() as session:
                    session.trust_env = False  # never route loopback traffic through a proxy
                    response = session.post(
                        instance.url,
                        data=body,
                        headers={"Content-Type": "application/json"},
                        timeout=FORWARD_TIMEOUT_SECONDS,
                    )
            except requests.RequestException:
                self.pool.died(instance, process)
                return 502, "instance_died", b"{}"
        try:
            outcome = str(response.json().get("outcome", f"http_{response.status_code}"))
        except ValueError:
            outcome = f"http_{response.status_code}"
        return response.status_code, outcome, response.content

    def _lose_first(self, message_id: str) -> bool:
        with self._lock:
            if message_id in self._lost:
                return False
            self._lost.add(message_id)
            return True
