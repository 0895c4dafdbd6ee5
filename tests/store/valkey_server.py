"""A real Redis-protocol server for the Valkey store's tests, and a proxy that loses answers.

`ValkeyServer` (emulator.valkey) starts `valkey-server`, or Debian's `redis-server` (7.x: the same
protocol and functions) where Valkey is not installed, on a free loopback port, with no
persistence and `noeviction`; `make test` installs redis-server when neither is on PATH. `ReplyDropper` sits
between a client and the server: `lose_next_answer()` lets the next function call reach the server
and drops its reply, closing the connection, as a network that fails after the write would; `freeze()`
holds everything sent either way, as a replication link that lags does (freezing the replica's
process would not: what the primary sent is already in the replica's socket buffer).
"""

from __future__ import annotations

import contextlib
import re
import socket
import threading
from collections import Counter

from emulator.valkey import ValkeyServer as ValkeyServer

_FCALL = re.compile(rb"\$5\r\nFCALL\r\n\$\d+\r\nrunonce_[0-9a-f]+_(\w+)\r\n")


class ReplyDropper:
    """A TCP proxy on 127.0.0.1:`port` to the server on `target`; counts the runonce functions
    called through it (`calls`, by function name) and the round trips (`round_trips`: what a
    client sends at once, which these small requests never split), and loses one answer when told."""

    def __init__(self, target: int):
        self._target = target
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = self._listener.getsockname()[1]
        self.calls: Counter[str] = Counter()
        self.round_trips = 0
        """What the clients sent, chunk by chunk: a request, or a pipeline of them, and its wait."""
        self._armed: str | bool = False
        self._thawed = threading.Event()
        self._thawed.set()
        self._lock = threading.Lock()
        self._open: list[socket.socket] = []
        threading.Thread(target=self._accept, daemon=True).start()

    def lose_next_answer(self, function: str | None = None) -> None:
        """The next call of a runonce function (of `function`, if given) reaches the server; its
        answer is dropped and the connection closed."""
        with self._lock:
            self._armed = function or True

    def freeze(self) -> None:
        """Hold whatever either side sends from here on: nothing reaches the other side."""
        self._thawed.clear()

    def writes(self) -> int:
        """How many calls of the functions that write went through (reads and snapshots not)."""
        return sum(count for name, count in self.calls.items() if name not in ("find", "snapshot"))

    def close(self) -> None:
        """Stop accepting, and close every connection."""
        self._listener.close()
        with self._lock:
            for sock in self._open:
                sock.close()
        self._thawed.set()  # a held chunk meets a closed socket, and its thread ends

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            server = socket.create_connection(("127.0.0.1", self._target))
            doomed = threading.Event()
            with self._lock:
                self._open += [client, server]
            threading.Thread(target=self._requests, args=(client, server, doomed), daemon=True).start()
            threading.Thread(target=self._replies, args=(server, client, doomed), daemon=True).start()

    def _requests(self, client: socket.socket, server: socket.socket, doomed: threading.Event) -> None:
        while chunk := _receive(client):
            with self._lock:
                called = [name.decode() for name in _FCALL.findall(chunk)]
                self.calls.update(called)
                self.round_trips += 1
                if called and (self._armed is True or self._armed in called):
                    self._armed = False
                    doomed.set()
            self._thawed.wait()
            try:
                server.sendall(chunk)
            except OSError:
                break
        _close(client, server)

    def _replies(self, server: socket.socket, client: socket.socket, doomed: threading.Event) -> None:
        while chunk := _receive(server):
            if doomed.is_set():
                break  # the command landed; its answer is lost with the connection
            self._thawed.wait()
            try:
                client.sendall(chunk)
            except OSError:
                break
        _close(client, server)


def _receive(sock: socket.socket) -> bytes:
    try:
        return sock.recv(65536)
    except OSError:
        return b""


def _close(*socks: socket.socket) -> None:
    for sock in socks:
        with contextlib.suppress(OSError):
            sock.shutdown(socket.SHUT_RDWR)
        sock.close()
