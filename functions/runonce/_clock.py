"""The one source of "now" for leases, retention and forced-run detection.

Production uses the system clock. A simulation (the local scheduler's accelerated clock) or a
test may install another with `set_clock`, so that the whole process agrees on one timeline.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime

Clock = Callable[[], datetime]


def system_now() -> datetime:
    """The current UTC time from the system clock."""
    return datetime.now(UTC)


_clock: Clock = system_now


def now() -> datetime:
    """The current UTC time from the installed clock."""
    return _clock()


def set_clock(clock: Clock | None) -> None:
    """Install a clock returning aware UTC datetimes for this process; None restores the system clock."""
    global _clock
    _clock = clock or system_now
