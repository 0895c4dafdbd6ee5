"""The push proxy ends every push within its ack deadline, as Pub/Sub does (a push not answered in
time is `deadline_exceeded`, a nack), whatever the instances do: an instance that accepts a request
and never answers, and a push queued behind it for an instance, are both answered 504 at the
deadline; the instance keeps the request until the request timeout, and the journal lists it as
open until then, with its message, attempt and instance. No emulator: a real instance pool whose
one instance is a process that accepts connections and never answers."""

from __future__ import annotations

import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import pytest
import requests

from localscheduler.hosts.pool import InstancePool
from localscheduler.hosts.probe import accepts
from localscheduler.pubsub.push_proxy import DEADLINE_EXCEEDED, PushJournal, PushProxy

pytestmark = pytest.mark.fast

# Accepts every connection, reads nothing, answers nothing.
SILENT = (
    "import socket, sys\n"
    "server = socket.socket()\n"
    "server.bind(('127.0.0.1', int(sys.argv[1])))\n"
    "server.listen(16)\n"
    "held = []\n"
    "while True:\n"
    "    held.append(server.accept())\n"
)
# Far above the 1 s ack deadline below, far below the 120 s the proxy once waited.
ANSWER_WITHIN = 20.0


@dataclass(frozen=True)
class Silent:
    """A `Host` whose instance accepts requests and never answers them."""

    def command(self, source: Path, target: str, port: int) -> list[str]:
        return [sys.executable, "-c", SILENT, str(port)]

    def environment(self, source: Path, target: str) -> dict[str, str]:
        return {}

    def serving(self, port: int) -> bool:
        return accepts(port)


@pytest.fixture
def proxy(tmp_path):
    pool = InstancePool("silent", tmp_path / "main.py", "handle", 1, {}, tmp_path, host=Silent()).start()
    proxy = PushProxy(pool, PushJournal(), ack_deadline_seconds=1.0, request_timeout_seconds=4.0).start()
    yield proxy
    proxy.stop()
    pool.stop()


def _push(proxy: PushProxy, message_id: str) -> requests.Response:
    envelope = {
        "subscription": "projects/p/subscriptions/s",
        "message": {"messageId": message_id, "data": "", "publishTime": "2026-12-07T09:00:00.000Z"},
    }
    return requests.post(proxy.url, json=envelope, timeout=ANSWER_WITHIN)


def test_a_push_to_an_instance_that_never_answers_is_answered_504_at_its_ack_deadline(proxy):
    answer = _push(proxy, "41")
    assert answer.status_code == 504
    assert proxy.journal.in_flight == 0
    [still] = proxy.journal.open()
    assert (still.message_id, still.attempt, still.answered, still.instance) == ("41", 1, True, "silent-0")
    assert still.describe(still.arrived + 3).endswith(
        "message 41, attempt 1, open 3 s: answered deadline_exceeded, instance silent-0 still works on it"
    )


def _ended(proxy: PushProxy, message_id: str) -> list:
    """The journal's ended pushes of `message_id`."""
    return [push for push in proxy.journal.snapshot() if push.message_id == message_id]


def test_a_push_queued_behind_a_busy_instance_is_answered_504_at_its_deadline(proxy):
    first = threading.Thread(target=_push, args=(proxy, "41"))
    first.start()
    deadline = time.monotonic() + ANSWER_WITHIN
    while not any(push.instance for push in proxy.journal.open()) and time.monotonic() < deadline:
        time.sleep(0.05)
    queued = _push(proxy, "42")
    first.join()
    assert queued.status_code == 504
    # The emulator is answered at the deadline; the push is journaled when its own request gives up
    # waiting for an instance, a moment later (PushProxy._request): wait for that, as long as for
    # any answer here. The first push stays open until its request timeout, and may end meanwhile.
    deadline = time.monotonic() + ANSWER_WITHIN
    while not _ended(proxy, "42") and time.monotonic() < deadline:
        time.sleep(0.05)
    [record] = _ended(proxy, "42")  # the queued push ended: no instance was free in time
    assert (record.message_id, record.outcome, record.instance, record.attempt) == (
        "42",
        DEADLINE_EXCEEDED,
        "",
        1,
    )


def test_the_instance_keeps_the_request_until_the_request_timeout_then_the_push_is_journaled(proxy):
    assert _push(proxy, "41").status_code == 504
    deadline = time.monotonic() + ANSWER_WITHIN
    while proxy.journal.open() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert proxy.journal.open() == [] and proxy.journal.quiet_for() > 0
    [record] = proxy.journal.snapshot()
    assert (record.status, record.outcome, record.instance, record.died) == (
        504,
        DEADLINE_EXCEEDED,
        "silent-0",
        None,
    )
    assert record.ended - record.started >= 4.0  # its request lasted the request timeout
    assert _push(proxy, "41").status_code == 504  # the redelivery: attempt 2, the instance free again
    [again] = proxy.journal.open()
    assert (again.attempt, again.instance) == (2, "silent-0")
