"""Signal: scheduled jobs the watchdog paused after their runs kept failing
(`Job.pause_after_failures`, docs/watchdog.md)."""

from __future__ import annotations

from collections.abc import Sequence

from stacks.constructs.monitoring.alerts import Alerting
from stacks.constructs.monitoring.filters import PAUSED, paused_jobs


def alert_paused(alerting: Alerting, scheduler_jobs: Sequence[str]) -> None:
    """An ERROR on every pause of one of these Scheduler jobs: it stays paused until resumed."""
    team = alerting.props.team
    alerting.log_match(
        "job-paused",
        "a job was paused after its runs kept failing",
        "ERROR",
        paused_jobs(scheduler_jobs),
        ["job", PAUSED],
        f"The watchdog paused the Scheduler job of `JOB` after its last `{PAUSED}` runs failed "
        f"(`failed_runs` lists their keys). It stays paused, and its ticks are not reported "
        f"missed, until it is resumed.\n\n"
        f"1. Read a failed run: `runonce show --team {team} --job JOB --time LAST_FAILED_TIME` "
        f"(`last_failed_time` in the line) and fix the cause.\n"
        f"2. Resume it: `runonce resume --team {team} --job JOB --why WHAT_WAS_FIXED`.\n"
        f"3. The ticks it missed while paused: `runonce backfill --team {team} --job JOB "
        f"--from FIRST_MISSED --dry-run`, then without --dry-run if the work is still wanted.",
    )
