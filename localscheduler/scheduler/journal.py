"""The scheduler's own log: one entry per HTTP delivery it made, and what became of it.

Kept in memory for the report and written as JSON lines, so a run's story (which attempt was
killed, which answer was lost, when Scheduler gave up) can be read next to the handler's log.
"""

from __future__ import annotations

import json
import threading
from dataclasses import asdict, dataclass
from datetime import datetime
from pathlib import Path


@dataclass(frozen=True)
class Sent:
    """One delivery: which run and attempt, the fault it carried, and the answer it got."""

    team: str
    job: str
    schedule_time: datetime
    """The ScheduleTime header (a forced run carries the next scheduled time)."""
    forced: bool
    attempt: int
    """1 for the first attempt, then 2, 3, ... for Scheduler's retries."""
    copy: bool
    """The second copy of a duplicated delivery (Scheduler does not wait on it)."""
    fault: str
    sent_at: datetime
    """Simulated time the delivery was sent."""
    instance: str
    status: int | None
    outcome: str
    """The handler's outcome, or "deadline", "connection", "no_instance"."""
    acknowledged: bool
    """Scheduler saw a 2xx and stops retrying (false when the fault lost the answer)."""
    killed: bool = False
    """The instance died while this attempt held the run's claim: the fault killed it mid-run,
    or the job killed it right after its effect (killed_after_effect)."""
    answered_at: datetime | None = None
    """Simulated time the answer (or the transport error) came back; for a killed attempt, a
    moment by which its instance was dead."""


@dataclass(frozen=True)
class GaveUp:
    """Scheduler stopped retrying a run without having seen a 2xx."""

    team: str
    job: str
    schedule_time: datetime
    forced: bool
    attempts: int
    at: datetime


@dataclass(frozen=True)
class NotDelivered:
    """Scheduler skipped a run on purpose at its time (see `misses`): nothing was sent."""

    team: str
    job: str
    schedule_time: datetime
    forced: bool
    at: datetime


Entry = Sent | GaveUp | NotDelivered
"""Anything the journal records."""


class Journal:
    """Thread-safe, append-only; optionally mirrored to a JSON-lines file."""

    def __init__(self, path: Path | None = None):
        self._lock = threading.Lock()
        self._entries: list[Entry] = []
        self._file = open(path, "a", encoding="utf-8") if path else None

    def add(self, entry: Entry) -> None:
        """Record one entry."""
        with self._lock:
            self._entries.append(entry)
            if self._file:
                self._file.write(
                    json.dumps({"event": type(entry).__name__, **asdict(entry)}, default=str) + "\n"
                )
                self._file.flush()

    def sent(self) -> list[Sent]:
        """Every delivery so far, in the order they were answered."""
        with self._lock:
            return [entry for entry in self._entries if isinstance(entry, Sent)]

    def gave_up(self) -> list[GaveUp]:
        """Every run Scheduler gave up on."""
        with self._lock:
            return [entry for entry in self._entries if isinstance(entry, GaveUp)]

    def not_delivered(self) -> list[NotDelivered]:
        """Every run Scheduler skipped on purpose."""
        with self._lock:
            return [entry for entry in self._entries if isinstance(entry, NotDelivered)]

    def close(self) -> None:
        """Close the mirror file."""
        if self._file:
            self._file.close()
            self._file = None
