"""Start and stop a real Firestore emulator on a free loopback port.

Used by the tests, the benchmark and the demo, so every one of them runs against the same
emulator the same way. The emulator is a Java program launched through gcloud; it runs in its
own process group so that stopping it also stops the JVM gcloud spawned.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from typing import IO

READY_LINE = "Dev App Server is now running"


class EmulatorUnavailable(RuntimeError):
    """The emulator cannot be started on this machine; the message says what to install."""


def free_port() -> int:
    """Return a TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _check_tools() -> None:
    if shutil.which("gcloud") is None:
        raise EmulatorUnavailable(
            "gcloud is not on PATH: install the Google Cloud CLI and its Firestore emulator "
            "(apt-get install google-cloud-cli google-cloud-cli-firestore-emulator)"
        )
    if shutil.which("java") is None:
        raise EmulatorUnavailable(
            "java is not on PATH: the Firestore emulator needs a Java runtime "
            "(apt-get install openjdk-17-jre-headless)"
        )


@dataclass
class FirestoreEmulator:
    """A running Firestore emulator; use as a context manager or call start()/stop()."""

    port: int = field(default_factory=free_port)
    startup_timeout: float = 60.0
    _proc: subprocess.Popen | None = None
    _log: IO[bytes] | None = None

    @property
    def host(self) -> str:
        """The value for FIRESTORE_EMULATOR_HOST."""
        return f"127.0.0.1:{self.port}"

    def start(self) -> FirestoreEmulator:
        """Launch the emulator and block until it says it is ready."""
        _check_tools()
        self._log = tempfile.NamedTemporaryFile(prefix="firestore-emulator-", suffix=".log", delete=False)
        self._proc = subprocess.Popen(
            ["gcloud", "emulators", "firestore", "start", f"--host-port={self.host}", "--quiet"],
            stdout=self._log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
        deadline = time.monotonic() + self.startup_timeout
        while time.monotonic() < deadline:
            if READY_LINE in self.log_text():
                return self
            if self._proc.poll() is not None:
                break
            time.sleep(0.2)
        text = self.log_text()
        self.stop()
        raise EmulatorUnavailable(f"Firestore emulator did not start on {self.host}:\n{text[-2000:]}")

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

    def __enter__(self) -> FirestoreEmulator:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()
