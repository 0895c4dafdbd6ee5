"""Cloud Run, locally: a pool of server processes ("instances") per function.

Each instance is one process of the pool's `Host` (by default functions-framework: see
`functions_framework`), serving one request at a time (Cloud Run with concurrency 1) in its own
process group on its own loopback port. A request goes to an idle ready instance and waits, as on
Cloud Run during a cold start, while none is free. An instance that dies is replaced on the same
port, the way Cloud Run replaces a crashed instance.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from emulator.firestore import free_port
from localscheduler.hosts.functions_framework import FunctionsFramework
from localscheduler.hosts.probe import accepts
from localscheduler.scheduler.delivery import Answer, post
from stacks.team import REPO_ROOT

# A request carrying this header, set to a run key, kills its instance as soon as the runonce core
# logs that the job body of that run started, i.e. while the instance holds the run's claim.
KILL_HEADER = "X-Localscheduler-Die-Holding-Claim"
DYING_SECONDS = 1.0


class Host(Protocol):
    """A kind of server that runs a function's handler: how one instance of it starts."""

    def command(self, source: Path, target: str, port: int) -> list[str]:
        """The command line of one instance serving entry point `target` of the file `source` on
        127.0.0.1:`port`, answering one request at a time."""
        ...

    def environment(self, source: Path, target: str) -> dict[str, str]:
        """What the instance's environment adds to the pool's."""
        ...

    def serving(self, port: int) -> bool:
        """The instance listening on `port` serves requests (its startup probe, `probe`)."""
        ...


@dataclass
class Instance:
    """One serving process; `ready` once it accepts connections, `busy` while it holds a request."""

    name: str
    port: int
    log_path: Path
    route: str = ""
    """The handler's path (functions-framework serves at the root)."""
    process: subprocess.Popen | None = None
    ready: bool = False
    busy: bool = False
    starts: int = 0

    @property
    def url(self) -> str:
        """Where the instance serves the function."""
        return f"http://127.0.0.1:{self.port}/{self.route}"

    def alive(self) -> bool:
        """The process runs (it may still be loading the function)."""
        return self.process is not None and self.process.poll() is None


@dataclass
class InstancePool:
    """The instances of one function; start(), acquire() one per request, kill(), stop()."""

    name: str
    """Function name, used in log file names and messages."""
    source: Path
    """The function's main.py."""
    target: str
    """Its entry point."""
    size: int
    """How many instances (Cloud Run max_instances)."""
    env: dict[str, str]
    """Environment of every instance on top of this process's (RUNONCE_*, emulator host, ...)."""
    log_dir: Path
    """Each instance appends its stdout and stderr to <log_dir>/<name>-<n>.log."""
    host: Host = field(default_factory=FunctionsFramework)
    """The server each instance runs."""
    route: str = ""
    """The path the handler is served at: "" for a function, a route of the app for a service."""
    instances: list[Instance] = field(default_factory=list)
    _changed: threading.Condition = field(default_factory=threading.Condition)
    _stopping: threading.Event = field(default_factory=threading.Event)
    _supervisor: threading.Thread | None = None

    def start(self, timeout: float = 90.0) -> InstancePool:
        """Launch every instance and wait until all accept connections."""
        self.log_dir.mkdir(parents=True, exist_ok=True)
        self.instances = [
            Instance(f"{self.name}-{n}", free_port(), self.log_dir / f"{self.name}-{n}.log", self.route)
            for n in range(self.size)
        ]
        for instance in self.instances:
            self._launch(instance)
        self._supervisor = threading.Thread(target=self._supervise, name=f"pool-{self.name}", daemon=True)
        self._supervisor.start()
        deadline = time.monotonic() + timeout
        with self._changed:
            while not all(instance.ready for instance in self.instances):
                if time.monotonic() > deadline:
                    raise RuntimeError(
                        f"{self.name}: instances not ready after {timeout:.0f} s; see {self.log_dir}"
                    )
                self._changed.wait(0.2)
        return self

    @property
    def restarts(self) -> int:
        """How many instances were replaced after dying."""
        return sum(instance.starts - 1 for instance in self.instances)

    @contextmanager
    def acquire(self, timeout: float) -> Iterator[Instance | None]:
        """An idle ready instance, held for one request; None if none was free within `timeout`."""
        deadline = time.monotonic() + timeout
        chosen = None
        with self._changed:
            while chosen is None:
                chosen = next((i for i in self.instances if i.ready and not i.busy and i.alive()), None)
                remaining = deadline - time.monotonic()
                if chosen is None and (remaining <= 0 or not self._changed.wait(remaining)):
                    chosen = next((i for i in self.instances if i.ready and not i.busy and i.alive()), None)
                    break
            if chosen is not None:
                chosen.busy = True
        try:
            yield chosen
        finally:
            if chosen is not None:
                with self._changed:
                    chosen.busy = False
                    self._changed.notify_all()

    def post(self, path: str, headers: dict[str, str], deadline: float, wait: float) -> Answer:
        """One attempt (`delivery.post`) to `path` under the pool's route on an idle instance, found
        within `wait` seconds; a lost connection takes the instance out of rotation (`died`)."""
        with self.acquire(wait) as instance:
            if instance is None:
                return Answer(None, error="no_instance")
            process = instance.process
            answer = post(instance.url + path, headers, b"", deadline)
            if answer.error == "connection":
                self.died(instance, process)
            return answer

    def kill(self, instance: Instance) -> None:
        """SIGKILL the instance mid-request, as a crash would; the pool replaces it."""
        with self._changed:
            instance.ready = False
            process = instance.process
        if process is not None:
            _kill_group(process)

    def died(self, instance: Instance, process: subprocess.Popen | None) -> None:
        """A request found the instance's `process` dead: take it out of rotation until the pool
        has replaced it (unless it already has: then the new process stays in rotation). The
        connection can break a moment before the process is seen dead (its worker died first):
        give it `DYING_SECONDS` to be, or the next request is handed to it and fails at once."""
        if process is None:
            return
        with contextlib.suppress(subprocess.TimeoutExpired):
            process.wait(timeout=DYING_SECONDS)
        with self._changed:
            if instance.process is process and not instance.alive():
                instance.ready = False

    def pids(self) -> list[int]:
        """Process group ids of the instances currently running."""
        return [i.process.pid for i in self.instances if i.alive() and i.process is not None]

    def stop(self) -> None:
        """Stop every instance and the supervisor; safe to call twice."""
        self._stopping.set()
        if self._supervisor is not None:
            self._supervisor.join(timeout=5)
        for instance in self.instances:
            if instance.process is not None:
                _kill_group(instance.process)

    def _launch(self, instance: Instance) -> None:
        env = {
            **os.environ,
            **self.env,
            "PYTHONPATH": os.pathsep.join([str(REPO_ROOT), str(REPO_ROOT / "functions")]),
            "PYTHONUNBUFFERED": "1",
            **self.host.environment(self.source, self.target),
        }
        command = self.host.command(self.source, self.target, instance.port)
        with open(instance.log_path, "ab") as log:
            instance.process = subprocess.Popen(
                command,
                env=env,
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
                cwd=REPO_ROOT,
            )
        instance.ready = False
        instance.starts += 1

    def _supervise(self) -> None:
        while not self._stopping.wait(0.05):
            for instance in self.instances:
                if not instance.alive() and instance.process is not None:
                    instance.process.wait()
                    _wait_closed(instance.port)
                    with self._changed:
                        self._launch(instance)
                elif not instance.ready and self.host.serving(instance.port):
                    with self._changed:
                        instance.ready = True
                        self._changed.notify_all()


def _wait_closed(port: int, timeout: float = 2.0) -> None:
    """Wait until nothing accepts on `port`: a dead instance's worker may outlive its master by a
    moment, holding the listening socket, and the new instance must not be probed ready on it
    (requests handed to it would fail at once, as if it had died under them)."""
    deadline = time.monotonic() + timeout
    while accepts(port) and time.monotonic() < deadline:
        time.sleep(0.01)


def _kill_group(process: subprocess.Popen) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGKILL)
    process.wait(timeout=10)
