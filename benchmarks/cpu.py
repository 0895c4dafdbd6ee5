"""`make bench`, the CPU side of an end-to-end measurement: a hog that competes for it, and the CPU
time that the processes serving the requests spend.

`Hog` is the workload the issue names, `python -c 'while True: pass'`: started once, paused
(SIGSTOP) and resumed (SIGCONT) between rounds, so the rounds with it and the rounds without it
interleave in one run and see the same emulator, the same processes and the same other load.

`GroupCpu` adds up the CPU time (user and system, every thread) of the processes of one process
group, read from /proc: a function instance (its gunicorn master and worker, gRPC's threads
included) or an emulator (gcloud's wrapper and the JVM). Read around a batch of requests to one
variant, it gives the CPU each of that variant's requests cost in its function and in the
emulator, which the library's own time beside its store calls (`benchmarks.own_time`) does not
count. Linux only, as `make bench` is.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path
from types import TracebackType

HOG = "while True: pass"
_PROC = Path("/proc")
_TICKS = os.sysconf("SC_CLK_TCK")


class Hog:
    """A process that burns a core while running; paused at start. Use as a context manager."""

    def __init__(self) -> None:
        self._process: subprocess.Popen[bytes] | None = None

    def __enter__(self) -> Hog:
        self._process = subprocess.Popen([sys.executable, "-c", HOG])
        self.run(False)
        return self

    @property
    def pid(self) -> int:
        """The hog's process id."""
        assert self._process is not None, "use the Hog as a context manager"
        return self._process.pid

    def run(self, running: bool) -> None:
        """Resume the hog, or pause it."""
        assert self._process is not None, "use the Hog as a context manager"
        self._process.send_signal(signal.SIGCONT if running else signal.SIGSTOP)

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, trace: TracebackType | None
    ) -> None:
        if self._process is not None:
            self._process.kill()  # SIGKILL ends a stopped process too
            self._process.wait()
            self._process = None


def _stat_fields(pid: str) -> list[str] | None:
    """The fields of /proc/PID/stat after the command name, or None if the process is gone."""
    try:
        text = (_PROC / pid / "stat").read_text()
    except OSError:
        return None
    return text[text.rindex(")") + 2 :].split()


class GroupCpu:
    """The CPU seconds the processes of one process group have spent, all their threads included.

    Its members are found once, when it is built (a process started later in the group is not
    counted: an instance's and an emulator's processes all start before the timed requests)."""

    def __init__(self, group: int):
        self.group = group
        self._pids = [
            pid
            for pid in (entry.name for entry in _PROC.iterdir() if entry.name.isdigit())
            if (fields := _stat_fields(pid)) is not None and int(fields[2]) == group
        ]
        if not self._pids:
            raise ValueError(f"no process in process group {group}")

    def seconds(self) -> float:
        """User and system time of the group's processes so far (a process gone counts 0)."""
        return sum(process_seconds(pid) or 0.0 for pid in self._pids)


def process_seconds(pid: int | str) -> float | None:
    """User and system time of one process so far, every thread; None if it is gone."""
    fields = _stat_fields(str(pid))
    return None if fields is None else (int(fields[11]) + int(fields[12])) / _TICKS  # utime, stime
