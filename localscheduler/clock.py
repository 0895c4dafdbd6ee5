"""The accelerated clock: schedule time that runs `rate` times faster than the wall clock.

The scheduler and every function worker build the same clock from one spec string, so the
handler's leases, retention and forced-run detection live on the same timeline as the cron
schedule. The mapping uses the system's wall clock (time.time), which all processes share.
"""

from __future__ import annotations

import functools
import os
import threading
import time
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

import runonce

CLOCK_FILE_VARIABLE = "RUNONCE_LOCAL_CLOCK_FILE"
"""An instance's environment: the file holding the scheduler's clock spec (see `follow_local_clock`)."""


@dataclass(frozen=True)
class AcceleratedClock:
    """Simulated UTC time: `start` at wall time `wall_start`, advancing `rate` seconds per second."""

    start: datetime
    """The simulated instant at wall time `wall_start` (aware, UTC)."""
    wall_start: float
    """Wall time (time.time()) at which the simulation reads `start`."""
    rate: float = 1.0
    """Simulated seconds per wall second; 60 plays a minute of schedule per second."""

    @classmethod
    def starting_now(cls, start: datetime, rate: float) -> AcceleratedClock:
        """A clock that reads `start` right now."""
        if rate <= 0:
            raise ValueError(f"clock rate must be positive, got {rate}")
        return cls(start.astimezone(UTC), time.time(), rate)

    def now(self) -> datetime:
        """The current simulated UTC time."""
        return self.at_wall(time.time())

    def at_wall(self, wall: float) -> datetime:
        """The simulated time at a given wall time."""
        return self.start + timedelta(seconds=(wall - self.wall_start) * self.rate)

    def wall_at(self, moment: datetime) -> float:
        """The wall time (time.time()) at which the simulation reaches `moment`."""
        return self.wall_start + (moment - self.start).total_seconds() / self.rate

    def wall_seconds(self, simulated_seconds: float) -> float:
        """How many wall seconds a simulated duration lasts."""
        return simulated_seconds / self.rate

    def sleep_until(self, moment: datetime, stop: threading.Event) -> bool:
        """Block until the simulation reaches `moment`; False if `stop` was set first."""
        return not stop.wait(max(0.0, self.wall_at(moment) - time.time()))

    def spec(self) -> str:
        """This clock as one string, for handing to a worker process through its environment."""
        return f"{self.start.isoformat()}|{self.wall_start!r}|{self.rate!r}"

    @classmethod
    def from_spec(cls, spec: str) -> AcceleratedClock:
        """The clock `spec()` described."""
        start, wall_start, rate = spec.split("|")
        return cls(datetime.fromisoformat(start), float(wall_start), float(rate))


def follow_local_clock() -> None:
    """Put runonce in this instance on the scheduler's clock, if the instance was started with one:
    CLOCK_FILE_VARIABLE names a file the scheduler writes the clock's spec to once it starts its
    clock, read at the first request. Without it the instance keeps the real clock, as
    `make bench` wants. Every local host calls it as it loads (function_source, the apps)."""
    path = os.environ.get(CLOCK_FILE_VARIABLE)
    if path is None:
        return
    clock = functools.cache(lambda: AcceleratedClock.from_spec(Path(path).read_text()))
    runonce.set_clock(lambda: clock().now())
