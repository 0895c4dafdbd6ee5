"""A real Redis-protocol server for the Valkey store's tests, and a proxy that loses answers.

`ValkeyServer` starts `valkey-server`, or Debian's `redis-server` (7.x: the same protocol and
functions) where Valkey is not installed, on a free loopback port, with no persistence and
`noeviction`; `make test` installs redis-server when neither is on PATH. `ReplyDropper` sits
between a client and the server: `lose_next_answer()` lets the next function call reach the server
and drops its reply, closing the connection, as a network that fails after the write would; `freeze()`
holds everything sent either way, as a replication link that lags does (freezing the replica's
process would not: what the primary sent is already in the replica's socket buffer).
"""

from __future__ import annotations

import contextlib
import re
import shutil
import socket
import subprocess
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path

from emulator.process import EmulatorUnavailable, free_port

INSTALL_HINT = "apt-get install -y redis-server (or put valkey-server on PATH)"
_FCALL = re.compile(rb"\$5\r\nFCALL\r\n\$\d+\r\nrunonce_[0-9a-f]+_(\w+)\r\n")


class ValkeyServer:
    """A running server on 127.0.0.1:`port`, its data in a temporary folder; `stop()` ends it."""

    def __init__(self, *settings: str):
        binary = shutil.which("valkey-server") or shutil.which("redis-server")
        if binary is None:
            raise EmulatorUnavailable(f"no valkey-server or redis-server on PATH: {INSTALL_HINT}")
        self.port = free_port()
        self._folder = tempfile.TemporaryDirectory(prefix="runonce-valkey-")
        args = [binary, "--port", str(self.port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"]
        args += ["--maxmemory-policy", "noeviction", "--dir", self._folder.name, *settings]
        self._log = Path(self._folder.name, "server.log").open("wb")
        self._process = subprocess.Popen(args, stdout=self._log, stderr=subprocess.STDOUT)
        self._wait_ready()

    def _wait_ready(self, timeout: float = 20.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self._process.poll() is not None:
                raise EmulatorUnavailable(f"the server exited: {self.log()[-2000:]}")
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=1) as sock:
                    sock.sendall(b"PING\r\n")
                    if sock.recv(64).startswith(b"+PONG"):
                        return
            except OSError:
                time.sleep(0.05)
        self.stop()
        raise EmulatorUnavailable(f"the server did not answer PING within {timeout:.0f} s")

    def log(self) -> str:
        """What the server printed."""
        return Path(self._folder.name, "server.log").read_text(errors="replace")

    @property
    def pid(self) -> int:
        """The server's process id (benchmarks.valkey reads its CPU time)."""
        return self._process.pid

    def kill(self) -> None:
        """End the server at once (SIGKILL), as a crashed primary ends."""
        self._process.kill()
        self._process.wait(10)

    def stop(self) -> None:
        """End the server and remove its folder."""
        if self._process.poll() is None:
            self._process.terminate()
            try:
                self._process.wait(10)
            except subprocess.TimeoutExpired:
                self._process.kill()
                self._process.wait(10)
        self._log.close()
        self._folder.cleanup()


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
