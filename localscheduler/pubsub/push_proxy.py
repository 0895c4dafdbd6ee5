"""The network between the Pub/Sub emulator and a function's local instances, with its faults.

The emulator pushes to this proxy (one endpoint per subscription); the proxy hands each push to
an idle instance of the pool, as Cloud Run's front end would, and passes the answer back. Two
faults live here because they happen outside the function: a **lost ack** (the function answered
200, but Pub/Sub sees a failure and redelivers: the proxy answers 500 instead, on the message's
first delivery that the function acknowledged) and a **late arrival** (no delivery of the
message gets through before `hold_seconds` after its publishTime, as behind a backlog or an
outage, so the function sees it older than its maximum event age; the held deliveries of one
message then pass one at a time, see `_hold`). Two more need nothing from the job either: a
**duplicate push** (the message's first push reaches two instances at once, as Pub/Sub's
at-least-once delivery may do) and an **instance killed holding the claim** (the instance serving
the message's first push is told, by a header, to die as soon as the runonce core logs that the
message's job body started: runonce has claimed it and cannot record its end; see
`function_source`). An instance that dies mid-request is answered 502, as Cloud Run answers a
crashed request. Every push is written to the journal.
"""

from __future__ import annotations

import contextlib
import json
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime

import requests
from werkzeug.serving import BaseWSGIServer, WSGIRequestHandler, make_server
from werkzeug.wrappers import Request, Response

from emulator.process import free_port
from localscheduler.hosts.pool import KILL_HEADER, InstancePool
from runonce.core.event import Event
from runonce.events.parse import event_key

LOSE_ACK_ATTRIBUTE = "demo_lose_ack"
HOLD_ATTRIBUTE = "demo_hold_seconds"
DUPLICATE_ATTRIBUTE = "demo_duplicate_push"
KILL_ATTRIBUTE = "demo_kill_holding_claim"
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
    """Wall time (time.time()) the push arrived."""
    ended: float
    """Wall time it was answered; for `instance_died`, just after the instance died."""
    instance: str = ""
    """The instance that served it ("" if none did)."""
    published: float | None = None
    """The message's publishTime as the emulator stamped it (wall time), None if unreadable."""
    copy: bool = False
    """The proxy's own second push of a `duplicate_push` message, not a delivery by Pub/Sub."""


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
        self._once: set[tuple[str, str]] = set()
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
        status, answer = self._push(Request(environ).get_data())
        return Response(answer, status=status, content_type="application/json")(environ, start_response)

    def _push(self, body: bytes, copy: bool = False) -> tuple[int, bytes]:
        """Serve one push (or, `copy`, the proxy's duplicate of one) and journal it."""
        self.journal.begin()
        started = time.time()
        message_id, subscription, status, outcome, answer, instance = "?", "?", 500, "bad_push", b"", ""
        published: float | None = None
        try:
            envelope = json.loads(body)
            message = envelope["message"]
            message_id, subscription = message["messageId"], envelope["subscription"]
            attributes = message.get("attributes") or {}
            published = _publish_time(message)
            if attributes.get(DUPLICATE_ATTRIBUTE) and self._first("duplicate", message_id):
                threading.Thread(target=self._push, args=(body, True), daemon=True).start()
            kill = bool(attributes.get(KILL_ATTRIBUTE)) and self._first("kill", message_id)
            key = event_key(Event(id=message_id, source=subscription, time=None)) if kill else None
            with self._hold(message, attributes):
                status, outcome, answer, instance = self._forward(body, key)
            if status == 200 and attributes.get(LOSE_ACK_ATTRIBUTE) and self._first("lose", message_id):
                status, outcome, answer = 500, "lost_ack", b'{"lost": true}'
        finally:
            ended = time.time()
            push = Push(message_id, subscription, status, outcome, started, ended, instance, published, copy)
            self.journal.end(push)
        return status, answer

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
        published = _publish_time(message) or time.time()
        time.sleep(max(0.0, published + hold - time.time()))
        with one_at_a_time:
            yield

    def _forward(self, body: bytes, kill_key: str | None) -> tuple[int, str, bytes, str]:
        """Post the push to an idle instance: (status, outcome, answer, instance name). With
        `kill_key`, the instance dies as soon as the body of that run key starts (see
        `function_source`)."""
        headers = {"Content-Type": "application/json"}
        if kill_key is not None:
            headers[KILL_HEADER] = kill_key
        with self.pool.acquire(timeout=FORWARD_TIMEOUT_SECONDS) as instance:
            if instance is None:
                return 503, "no_instance", b"{}", ""
            process = instance.process
            try:
                with requests.Session() as session:
                    session.trust_env = False  # never route loopback traffic through a proxy
                    response = session.post(
                        instance.url, data=body, headers=headers, timeout=FORWARD_TIMEOUT_SECONDS
                    )
            except requests.RequestException:
                self.pool.died(instance, process)
                return 502, "instance_died", b"{}", instance.name
        try:
            outcome = str(response.json().get("outcome", f"http_{response.status_code}"))
        except ValueError:
            outcome = f"http_{response.status_code}"
        return response.status_code, outcome, response.content, instance.name

    def _first(self, fault: str, message_id: str) -> bool:
        """True the first time `fault` asks for this message, False after."""
        with self._lock:
            if (fault, message_id) in self._once:
                return False
            self._once.add((fault, message_id))
            return True


def _publish_time(message: dict) -> float | None:
    """The pushed message's publishTime (RFC 3339, milliseconds on the emulator) as wall time."""
    try:
        return datetime.fromisoformat(str(message["publishTime"]).replace("Z", "+00:00")).timestamp()
    except (KeyError, ValueError):
        return None
