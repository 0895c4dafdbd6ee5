"""Signal: scheduled runs that did not happen. The watchdog's missed-run lines, its catch-ups that
did not run the missed run, and the runs a catch-up or a backfill started."""

from __future__ import annotations

from collections.abc import Sequence

from stacks.constructs.monitoring.alerts import Alerting
from stacks.constructs.monitoring.dashboard import Chart, series
from stacks.constructs.monitoring.filters import (
    CATCH_UP,
    CAUSE,
    failed_catch_ups,
    metric_filter,
    watchdog_lines,
)

STARTED_BY = ("catch_up", "backfill")
"""The causes the dashboard charts: runs the watchdog caught up, and runs a backfill started."""
LABELS = {"job": "The scheduled job", "missed_run": "How the run was missed (MissedRun)"}
"""The missed runs metric's labels and their descriptions."""


def alert_missed(alerting: Alerting, scheduler_jobs: Sequence[str]) -> None:
    """An ERROR on every missed run the watchdog reports about these Scheduler jobs."""
    team = alerting.props.team
    alerting.log_match(
        "missed-run",
        "a scheduled run was missed",
        "ERROR",
        watchdog_lines(scheduler_jobs),
        ["job", "missed_run"],
        f"The watchdog found a scheduled run of job `JOB` that did not finish in time "
        f"(`missed_run`: never_delivered, waited_out, still_held or retried_out). Its log line "
        f"carries the exact command.\n\n"
        f"1. Read the run: `runonce show --team {team} --job JOB --time SCHEDULE_TIME`.\n"
        f"2. still_held: an attempt may still be alive; wait until its lease ends "
        f"(`lease_expires` in show: rerun and release are refused until then), then follow "
        f"what show prints; retried_out: `runonce rerun --team {team} --job JOB --time "
        f"SCHEDULE_TIME`; "
        f"never_delivered (no record to re-run: look at the Scheduler job first) or waited_out "
        f"(a `wait` job's run whose retries ran out while the run before it held the job): if "
        f"the work is still wanted, `runonce backfill --team {team} --job JOB --from "
        f"SCHEDULE_TIME --to SCHEDULE_TIME` (the command `show` prints) runs exactly that run, "
        f"once.",
    )


def alert_catch_up_failed(alerting: Alerting, scheduler_jobs: Sequence[str]) -> None:
    """An ERROR on every catch-up of these Scheduler jobs that did not run the missed run."""
    team = alerting.props.team
    alerting.log_match(
        "catch-up-failed",
        "a catch-up did not run a missed run",
        "ERROR",
        failed_catch_ups(scheduler_jobs),
        ["job", CATCH_UP],
        f"The watchdog found a missed run of job `JOB` within its catch-up window but could "
        f"not start it (`failed`: its request could not be written, or Scheduler refused "
        f"`jobs.run`), or started it and no delivery came (`not_delivered`); it does not try "
        f"again. The run is also reported missed. Its log line says why (`catch_up_error`) "
        f"and carries the exact command.\n\n"
        f"1. Read the run: `runonce show --team {team} --job JOB --time SCHEDULE_TIME`.\n"
        f"2. Once the cause is fixed, start it once: `runonce backfill --team {team} --job JOB "
        f"--from SCHEDULE_TIME --to SCHEDULE_TIME` (or `runonce rerun` for a run that has a "
        f"record).",
    )


def charts(answers: str, on: str, missed_runs: str) -> list[Chart]:
    """The runs a catch-up or backfill started (on the answers metric `answers`, time series of
    `on`), then the missed runs (on the metric `missed_runs`)."""
    by_job = ["metric.label.job"]
    return [
        (
            "Runs caught up or backfilled (cause)",
            [
                series(metric_filter(answers, on, **{CAUSE: cause}), [*by_job, "metric.label.outcome"])
                for cause in STARTED_BY
            ],
        ),
        (
            "Missed runs (watchdog)",
            [series(metric_filter(missed_runs, ""), [*by_job, "metric.label.missed_run"])],
        ),
    ]
