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

**Every push ends within its ack deadline**, as on Pub/Sub, where a subscription's
`ackDeadlineSeconds` "is also used to set the request timeout for the call to the push endpoint"
and a push not answered in time counts as the response class `deadline_exceeded`, a nack, and is
redelivered (Pub/Sub API reference, `Subscription`; "Troubleshooting push subscriptions"). The
emulator never times out a push (FACTS), so the proxy does: the ack deadline runs from the moment
the push reaches an instance's queue (after a late message's hold, which stands for the time
before Pub/Sub sends it) and covers the wait for an idle instance and the instance's answer; when
it passes, the emulator is answered 504 (`deadline_exceeded`). The instance keeps the request, as
Cloud Run's does ("Closing the connection doesn't terminate the container instance. The container
might continue processing the aborted request": Cloud Run, "Configure request timeout"): it stays
busy until it answers, dies, or reaches `request_timeout_seconds` (Cloud Run's request timeout;
then the proxy closes the connection, outcome `request_timeout`, and the instance is back in
rotation, still working if it is). The push is journaled when its request ends, with the death of
its instance if it died (`Push.died`); until then the journal lists it as open.
"""

from __future__ import annotations

import itertools
import json
import threading
import time
from collections import Counter
from dataclasses import dataclass, field, replace
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
ACK_DEADLINE_SECONDS = 10.0
"""Pub/Sub's default (and minimum) ack deadline of a subscription."""
REQUEST_TIMEOUT_SECONDS = 30.0
"""How long an instance may work on one request; longer than any job of the demo."""
DEADLINE_EXCEEDED = "deadline_exceeded"


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
    """The function's `outcome`, `lost_ack`, `instance_died`, `request_timeout`, or
    `deadline_exceeded` (no answer within the ack deadline: answered 504)."""
    started: float
    """Wall time (time.time()) the push arrived."""
    ended: float
    """Wall time its request ended: the instance answered or died (then just after it died), or
    no instance was free by the ack deadline. The emulator was answered then, or at the ack
    deadline if that came first (`deadline_exceeded`)."""
    instance: str = ""
    """The instance that served it ("" if none did)."""
    published: float | None = None
    """The message's publishTime as the emulator stamped it (wall time), None if unreadable."""
    copy: bool = False
    """The proxy's own second push of a `duplicate_push` message, not a delivery by Pub/Sub."""
    attempt: int = 0
    """The how-manieth push of its message the proxy received (a copy: the push it copies)."""
    died: float | None = None
    """Wall time its instance died under it (None: it did not), even after a `deadline_exceeded`."""


@dataclass(frozen=True)
class OpenPush:
    """A push not journaled yet: the emulator still waits for its answer, or its instance still
    works on it after the ack deadline answered the emulator."""

    message_id: str
    attempt: int
    copy: bool
    arrived: float
    """time.monotonic() when it arrived."""
    answered: bool = False
    """The emulator was answered (`deadline_exceeded`); the instance still holds the request."""
    instance: str = ""
    """The instance holding its request ("" while it waits for one)."""

    def describe(self, now: float) -> str:
        """The push, its attempt, its age at `now` (monotonic) and what it waits for."""
        copy = ", the proxy's copy" if self.copy else ""
        age = f"message {self.message_id}, attempt {self.attempt}{copy}, open {now - self.arrived:.0f} s"
        if self.answered:
            return f"{age}: answered {DEADLINE_EXCEEDED}, instance {self.instance or '?'} still works on it"
        return f"{age}: {'on instance ' + self.instance if self.instance else 'waiting for an instance'}"


@dataclass
class PushJournal:
    """Every push, in the order their requests ended, and those still open; thread-safe."""

    pushes: list[Push] = field(default_factory=list)
    last_activity: float = field(default_factory=time.monotonic)
    _open: dict[int, OpenPush] = field(default_factory=dict)
    _tokens: itertools.count = field(default_factory=itertools.count)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def begin(self, message_id: str, attempt: int, copy: bool) -> int:
        """A push arrived; returns its token."""
        with self._lock:
            token = next(self._tokens)
            self._open[token] = OpenPush(message_id, attempt, copy, time.monotonic())
            self.last_activity = time.monotonic()
            return token

    def update(self, token: int, **changes: object) -> None:
        """The open push got an instance (`instance`) or its emulator answer (`answered`)."""
        with self._lock:
            self._open[token] = replace(self._open[token], **changes)  # type: ignore[arg-type]
            self.last_activity = time.monotonic()

    def end(self, token: int, push: Push) -> None:
        """The push's request ended."""
        with self._lock:
            del self._open[token]
            self.last_activity = time.monotonic()
            self.pushes.append(push)

    @property
    def in_flight(self) -> int:
        """Pushes whose emulator answer is still to come."""
        with self._lock:
            return sum(not push.answered for push in self._open.values())

    def open(self) -> list[OpenPush]:
        """The pushes not journaled yet, oldest first."""
        with self._lock:
            return sorted(self._open.values(), key=lambda push: push.arrived)

    def quiet_for(self) -> float:
        """Seconds since the last push arrived, was answered or ended; 0 while one is open."""
        with self._lock:
            return 0.0 if self._open else time.monotonic() - self.last_activity

    def snapshot(self) -> list[Push]:
        """The pushes answered so far."""
        with self._lock:
            return list(self.pushes)


class PushProxy:
    """An HTTP endpoint in front of an instance pool; `url` is the push endpoint."""

    def __init__(
        self,
        pool: InstancePool,
        journal: PushJournal,
        ack_deadline_seconds: float = ACK_DEADLINE_SECONDS,
        request_timeout_seconds: float = REQUEST_TIMEOUT_SECONDS,
    ):
        self.pool = pool
        self.journal = journal
        self.ack_deadline_seconds = ack_deadline_seconds
        self.request_timeout_seconds = request_timeout_seconds
        self.port = free_port()
        self._once: set[tuple[str, str]] = set()
        self._attempts: Counter[str] = Counter()
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
        """Serve one push (or, `copy`, the proxy's duplicate of one): answer the emulator within
        the ack deadline; the push is journaled when its request ends."""
        started = time.time()
        try:
            envelope = json.loads(body)
            message = envelope["message"]
            message_id, subscription = message["messageId"], envelope["subscription"]
            attributes = message.get("attributes") or {}
        except (ValueError, KeyError, TypeError):
            token = self.journal.begin("?", 0, copy)
            self.journal.end(token, Push("?", "?", 500, "bad_push", started, time.time(), copy=copy))
            return 500, b""
        with self._lock:
            self._attempts[message_id] += 0 if copy else 1
            attempt = self._attempts[message_id]
        token = self.journal.begin(message_id, attempt, copy)
        if attributes.get(DUPLICATE_ATTRIBUTE) and self._first("duplicate", message_id):
            threading.Thread(target=self._push, args=(body, True), daemon=True).start()
        kill = bool(attributes.get(KILL_ATTRIBUTE)) and self._first("kill", message_id)
        key = event_key(Event(id=message_id, source=subscription, time=None)) if kill else None
        published = _publish_time(message)
        push = Push(
            message_id, subscription, 504, DEADLINE_EXCEEDED, started, started, "", published, copy, attempt
        )
        request = _Request(token, push, lose_ack=bool(attributes.get(LOSE_ACK_ATTRIBUTE)))
        one_at_a_time = self._hold(message_id, published, attributes)
        deadline = time.monotonic() + self.ack_deadline_seconds
        threading.Thread(
            target=self._request, args=(request, body, key, deadline, one_at_a_time), daemon=True
        ).start()
        if not request.done.wait(max(0.0, deadline - time.monotonic())):
            with request.lock:
                if not request.done.is_set():
                    request.answered = True
                    self.journal.update(token, answered=True)
                    return 504, b'{"deadline_exceeded": true}'
        return request.push.status, request.answer

    def _hold(self, message_id: str, published: float | None, attributes: dict) -> threading.Lock | None:
        """Hold a late message's delivery until publishTime + hold, then return the lock that lets
        its deliveries through one at a time (None for a message not held). The emulator pushes a
        held message again while the first push is open; released together, the two would reach
        runonce at once, and a duplicate that finds the event failed but not yet marked
        dead-lettered forwards a second dead-letter copy (a race in runonce.events, reported on
        issue 9)."""
        hold = float(attributes.get(HOLD_ATTRIBUTE, 0))
        if hold <= 0:
            return None
        with self._lock:
            one_at_a_time = self._held.setdefault(message_id, threading.Lock())
        time.sleep(max(0.0, (published or time.time()) + hold - time.time()))
        return one_at_a_time

    def _request(
        self,
        request: _Request,
        body: bytes,
        kill_key: str | None,
        deadline: float,
        one_at_a_time: threading.Lock | None,
    ) -> None:
        """The push's request: its turn (a held message's), an instance idle before `deadline`
        (monotonic), the instance's answer; then journal the push as the emulator was answered."""
        push, answer = request.push, b"{}"
        if one_at_a_time is None or one_at_a_time.acquire(timeout=max(0.0, deadline - time.monotonic())):
            try:
                push, answer = self._forward(request, body, kill_key, deadline)
            finally:
                if one_at_a_time is not None:
                    one_at_a_time.release()
        with request.lock:
            if request.answered:
                push = replace(push, status=504, outcome=DEADLINE_EXCEEDED)
            elif push.status == 200 and request.lose_ack and self._first("lose", push.message_id):
                push, answer = replace(push, status=500, outcome="lost_ack"), b'{"lost": true}'
            push = replace(push, ended=time.time())
            self.journal.end(request.token, push)
            request.push, request.answer = push, answer
            request.done.set()

    def _forward(
        self, request: _Request, body: bytes, kill_key: str | None, deadline: float
    ) -> tuple[Push, bytes]:
        """Post the push to an instance idle before `deadline` (monotonic) and wait for its answer
        up to the request timeout: (the push with its instance and outcome, the answer). With
        `kill_key`, the instance dies as soon as the body of that run key starts (see
        `function_source`)."""
        headers = {"Content-Type": "application/json"}
        if kill_key is not None:
            headers[KILL_HEADER] = kill_key
        with self.pool.acquire(timeout=max(0.0, deadline - time.monotonic())) as instance:
            if instance is None:
                return request.push, b"{}"
            self.journal.update(request.token, instance=instance.name)
            push = replace(request.push, instance=instance.name)
            process = instance.process
            try:
                with requests.Session() as session:
                    session.trust_env = False  # never route loopback traffic through a proxy
                    response = session.post(
                        instance.url, data=body, headers=headers, timeout=self.request_timeout_seconds
                    )
            except requests.Timeout:
                return replace(push, status=504, outcome="request_timeout"), b"{}"
            except requests.RequestException:
                self.pool.died(instance, process)
                return replace(push, status=502, outcome="instance_died", died=time.time()), b"{}"
        try:
            outcome = str(response.json().get("outcome", f"http_{response.status_code}"))
        except ValueError:
            outcome = f"http_{response.status_code}"
        return replace(push, status=response.status_code, outcome=outcome), response.content

    def _first(self, fault: str, message_id: str) -> bool:
        """True the first time `fault` asks for this message, False after."""
        with self._lock:
            if (fault, message_id) in self._once:
                return False
            self._once.add((fault, message_id))
            return True


@dataclass
class _Request:
    """One push's request to an instance, shared by the thread that answers the emulator and the
    one that waits for the instance: whichever ends first under `lock` decides the answer."""

    token: int
    push: Push
    """The push so far; once `done`, as journaled."""
    lose_ack: bool
    answer: bytes = b"{}"
    answered: bool = False
    """The emulator was answered `deadline_exceeded` before the instance answered."""
    lock: threading.Lock = field(default_factory=threading.Lock)
    done: threading.Event = field(default_factory=threading.Event)


def _publish_time(message: dict) -> float | None:
    """The pushed message's publishTime (RFC 3339, milliseconds on the emulator) as wall time."""
    try:
        return datetime.fromisoformat(str(message["publishTime"]).replace("Z", "+00:00")).timestamp()
    except (KeyError, ValueError):
        return None
