"""A gcloud emulator as a child process: free port, own process group, ready line, stop.

`emulator.firestore` and `emulator.pubsub` are this with their command and ready line. The
emulators are Java programs launched through gcloud; each runs in its own process group so that
stopping it also stops the JVM gcloud spawned.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time
from dataclasses import dataclass, field
from typing import IO, ClassVar, Self


class EmulatorUnavailable(RuntimeError):
    """The emulator cannot be started on this machine; the message says what to install."""


_handed_out: set[int] = set()
_handing_out = threading.Lock()


def free_port() -> int:
    """Return a TCP port on 127.0.0.1 that nothing listens on right now and that this process has
    not handed out before: servers started from parallel threads bind only after the call, and
    the kernel may offer a port just released to the next caller."""
    with _handing_out:
        while True:
            with socket.socket() as sock:
                sock.bind(("127.0.0.1", 0))
                port = sock.getsockname()[1]
            if port not in _handed_out:
                _handed_out.add(port)
                return port


@dataclass
class EmulatorProcess:
    """A running emulator; use as a context manager or call start()/stop()."""

    port: int = field(default_factory=free_port)
    startup_timeout: float = 60.0
    _proc: subprocess.Popen | None = None
    _log: IO[bytes] | None = None

    name: ClassVar[str] = "emulator"
    """What the error messages call it."""
    gcloud_args: ClassVar[tuple[str, ...]] = ()
    """The gcloud arguments that start it (before --host-port)."""
    ready_line: ClassVar[str] = ""
    """What it prints once it serves requests."""
    install_hint: ClassVar[str] = ""
    """The packages to install when gcloud or java is missing."""

    @property
    def host(self) -> str:
        """host:port, the value for the client's *_EMULATOR_HOST variable."""
        return f"127.0.0.1:{self.port}"

    @property
    def process_group(self) -> int | None:
        """The process group of gcloud and the JVM it spawned while running, else None."""
        return self._proc.pid if self._proc is not None else None

    def start(self) -> Self:
        """Launch the emulator and block until it says it is ready."""
        for tool in ("gcloud", "java"):
            if shutil.which(tool) is None:
                raise EmulatorUnavailable(f"{tool} is not on PATH: the {self.name} needs {self.install_hint}")
        self._log = tempfile.NamedTemporaryFile(prefix="emulator-", suffix=".log", delete=False)
        self._proc = subprocess.Popen(
            ["gcloud", *self.gcloud_args, f"--host-port={self.host}", "--quiet"],
            stdout=self._log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
        deadline = time.monotonic() + self.startup_timeout
        while time.monotonic() < deadline:
            if self.ready_line in self.log_text():
                return self
            if self._proc.poll() is not None:
                break
            time.sleep(0.2)
        text = self.log_text()
        self.stop()
        raise EmulatorUnavailable(f"{self.name} did not start on {self.host}:\n{text[-2000:]}")

    def log_text(self) -> str:
        """Everything the emulator has printed so far."""
        if self._log is None:
            return ""
        with open(self._log.name, encoding="utf-8", errors="replace") as handle:
            return handle.read()

    def stop(self) -> None:
        """Stop the emulator and the JVM it spawned; safe to call twice."""
        if self._proc is not None and self._proc.poll() is None:
            try:
                os.killpg(self._proc.pid, signal.SIGTERM)
                self._proc.wait(timeout=15)
            except (ProcessLookupError, subprocess.TimeoutExpired):
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(self._proc.pid, signal.SIGKILL)
                self._proc.wait(timeout=5)
        self._proc = None
        if self._log is not None:
            self._log.close()
            os.unlink(self._log.name)
            self._log = None

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()
