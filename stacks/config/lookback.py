"""How far back the team's watchdog looks for missed runs, and how often it looks: plain numbers
the validation (a job's catch-up window must fit inside them) and the watchdog's construct (which
writes them into the watchdog's configuration) share."""

from __future__ import annotations

TICK_SCHEDULE = "*/10 * * * *"
TICK_SECONDS = 600
DEFAULT_LOOKBACK_SECONDS = 24 * 3600
"""How far back a tick checks runs: a day, or longer where a job's grace needs it, so a watchdog
that was down for hours still finds what it missed; never longer than the job's retention."""
LOOKBACK_TICKS = 3
"""A run is checked by at least this many ticks after its grace before it leaves the lookback."""


def lookback_seconds(grace_seconds: int, retention_seconds: int) -> int:
    """A day, or enough for `LOOKBACK_TICKS` ticks after the grace; at most the retention, after
    which the run's record may be gone and the run would read as never delivered."""
    wanted = max(DEFAULT_LOOKBACK_SECONDS, grace_seconds + LOOKBACK_TICKS * TICK_SECONDS)
    return min(wanted, retention_seconds)


def first_judged_seconds(grace_seconds: int) -> int:
    """How long after a run's scheduled time the watchdog may first report it missed, at the
    latest: its grace, then up to one tick."""
    return grace_seconds + TICK_SECONDS
