"""A real Redis-protocol server as a child process: `valkey-server`, or Debian's `redis-server`
(7.x: the same protocol and functions) where Valkey is not installed, on a free loopback port,
with no persistence and `noeviction`, its data in a temporary folder. The Valkey store's tests
and `make demo` start one; `make valkey-server` installs redis-server when neither is on PATH.
"""

from __future__ import annotations

import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path

from emulator.process import EmulatorUnavailable, free_port

INSTALL_HINT = "apt-get install -y redis-server (or put valkey-server on PATH)"


class ValkeyServer:
    """A running server on 127.0.0.1:`port`, its data in a temporary folder; `stop()` ends it."""

    name = "the Valkey server"
    """What the demo's messages call it."""

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

    @property
    def url(self) -> str:
        """The server as RUNONCE_STORE names it."""
        return f"valkey://127.0.0.1:{self.port}"

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
