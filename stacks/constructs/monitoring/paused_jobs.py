"""Signal: scheduled jobs the watchdog paused after their runs kept failing
(`Job.pause_after_failures`, docs/schedules/pause.md): an alert on each pause, and a dashboard chart per
job that may be paused."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from runonce.contract import MissedRun
from stacks.constructs.monitoring.alerts import Alerting
from stacks.constructs.monitoring.dashboard import Chart, series
from stacks.constructs.monitoring.filters import PAUSED, metric_filter, paused_jobs

LABELS = {"job": "The job the watchdog paused, as its team file names it"}
"""The paused jobs metric's labels and their descriptions: the pause line's `job` is the team
file's name (its `scheduler_job` is the Scheduler job id)."""
RETRIED_OUT = MissedRun.RETRIED_OUT.value
"""The missed run (`MissedRun`) that counts toward a pause as a failed run does."""


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


def charts(jobs: Mapping[str, str], answers: str, on: str, missed_runs: str, paused: str) -> list[Chart]:
    """One chart per job the watchdog may pause (`jobs`: its Scheduler job id by job name), titled
    by the job: its pauses (the metric `paused`, labelled by the team file's name, as the pause
    line's `job`), its runs that failed for good (the answers metric `answers`, time series of
    `on`, labelled by the Scheduler job id, as an answer line's `job`: the X-CloudScheduler-JobName
    header) and its runs retried out (the missed runs metric `missed_runs`, by the team file's
    name): the two kinds of failed run a pause counts."""
    by_job = ["metric.label.job"]
    return [
        (
            f"{job}: pauses and failed runs",
            [
                series(metric_filter(paused, "", job=job), by_job, legend="paused"),
                series(
                    metric_filter(answers, on, job=scheduler_job, outcome="failed"), by_job, legend="failed"
                ),
                series(
                    metric_filter(missed_runs, "", job=job, missed_run=RETRIED_OUT),
                    by_job,
                    legend=RETRIED_OUT,
                ),
            ],
        )
        for job, scheduler_job in jobs.items()
    ]
