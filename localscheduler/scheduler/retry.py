"""Cloud Scheduler's retry_config, as its reference documents it.

The wait before retry n starts at min_backoff, doubles max_doublings times, then grows linearly
by that last doubled step, and never exceeds max_backoff: with 10 s / 300 s / 3 doublings the
retries come 10, 20, 40, 80, 160, 240, 300, 300 s apart. A failed run is retried until both
retry_count and max_retry_duration (0: no duration limit) are used up, and never at or past the
job's next scheduled time.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from stacks.team import Retry


@dataclass(frozen=True)
class RetryPolicy:
    """When, if at all, a failed attempt of a run is tried again."""

    config: Retry

    def backoff(self, retry: int) -> float:
        """Seconds to wait after a failed attempt before retry number `retry` (1-based)."""
        return float(self.config.backoff_seconds(retry))

    def next_retry(
        self, retries_done: int, first_attempt: datetime, failed_at: datetime, next_scheduled: datetime
    ) -> datetime | None:
        """The time of the next retry after an attempt failed at `failed_at`, or None: give up."""
        at = failed_at + timedelta(seconds=self.backoff(retries_done + 1))
        if self.config.exhausted(retries_done, (at - first_attempt).total_seconds()) or at >= next_scheduled:
            return None
        return at

    def retry_times(self, first_attempt: datetime, next_scheduled: datetime) -> list[datetime]:
        """When the retries of a run come if every attempt fails at once: the whole retry window."""
        window = (next_scheduled - first_attempt).total_seconds()
        return [first_attempt + timedelta(seconds=offset) for offset in self.config.offsets_seconds(window)]
