"""Signal: the answers of the team's functions, services and App Engine jobs. Runs that failed
for good, answers that keep saying the store or a setting is broken, and the charts of every
answer by job and outcome."""

from __future__ import annotations

from collections.abc import Sequence

from stacks.constructs.monitoring.alerts import Alerting, threshold
from stacks.constructs.monitoring.dashboard import Chart, series
from stacks.constructs.monitoring.filters import (
    ANSWERED,
    CAUSE,
    EXCLUDED,
    NOT_RUN_OUTCOMES,
    RETRY_OUTCOMES,
    SKIPPED,
    WAITING,
    any_of,
    metric_filter,
)
from stacks.toolchain import ITerraformDependable

SUSTAINED_OUTCOMES = ("misconfigured", "store_unavailable")
"""The answers that alert once they keep coming for `AlertThresholds.sustained_seconds`."""
SUSTAINED_ABOVE = 1
"""More than one such answer in every sliding window of `sustained_seconds`, for that long: a
lone answer, or two close together, stays below; a run whose retries keep answering so does not."""
LABELS = {
    "job": "The job the run belongs to",
    "outcome": "The answer's outcome",
    CAUSE: "What requested the run, if a request did: catch_up, backfill or rerun",
}
"""The answers metric's labels and their descriptions."""


def alert_failed(alerting: Alerting, lines: str) -> None:
    """An ERROR on every answer after which no delivery runs the job again, among `lines` (the
    team's runonce lines)."""
    team = alerting.props.team
    alerting.log_match(
        "failed",
        "a run failed permanently",
        "ERROR",
        f"{lines} AND {ANSWERED} AND {any_of('jsonPayload.outcome', NOT_RUN_OUTCOMES)}",
        ["job", "outcome"],
        f"A run of job `JOB` (the notification's `job` label) will not run again by itself: it "
        f"failed permanently (`failed`: its job raised PermanentError or returned a 4xx), or it "
        f"came too late to be deduplicated and was not run (`too_old`).\n\n"
        f"1. List the failed runs: `runonce runs --team {team} --job JOB --status failed`.\n"
        f"2. Read one with its error: `runonce show KEY --team {team}`.\n"
        f"3. Once the cause is fixed, run the command `show` prints under `next` (a scheduled "
        f"run: `runonce rerun --team {team} --job JOB --time SCHEDULE_TIME`; an event: "
        f"`runonce replay COPY_ID --team {team}`).",
    )


def alert_sustained(
    alerting: Alerting, answers: str, answered_on: str, after: Sequence[ITerraformDependable]
) -> None:
    """A CRITICAL while `misconfigured` or `store_unavailable` answers keep coming, on the answers
    metric `answers` (time series of `answered_on`), created `after` the metrics have settled."""
    team, sustained = alerting.props.team, alerting.props.thresholds.sustained_seconds
    alerting.policy(
        "store-or-config",
        f"misconfigured or store unavailable for {sustained // 60} min",
        "CRITICAL",
        [
            threshold(
                metric_filter(answers, answered_on, outcome=outcome),
                f"{outcome} answers for {sustained // 60} min",
                f"{sustained}s",
                SUSTAINED_ABOVE,
                "ALIGN_SUM",
                f"{sustained}s",
            )
            for outcome in SUSTAINED_OUTCOMES
        ],
        f"The functions of team {team} keep answering `misconfigured` (a setting or grant is "
        f"wrong) or `store_unavailable` (the Firestore ledger cannot be reached): no run of the "
        f"affected job can take effect until it is fixed; Scheduler and Pub/Sub keep retrying.\n\n"
        f"1. See which runs are waiting: `runonce runs --team {team} --job JOB --status in_progress`.\n"
        f"2. Read the error of one: `runonce show KEY --team {team}`; fix the setting, grant or "
        f"database it names.",
        after=after,
    )


def charts(answers: str, on: str) -> list[Chart]:
    """The answers by job and outcome, then one chart per outcome an operator acts on."""
    by_job = ["metric.label.job"]
    return [
        (
            "Runs per job by outcome",
            [series(metric_filter(answers, on), ["metric.label.job", "metric.label.outcome"])],
        ),
        (
            "Duplicates skipped (duplicate)",
            [series(metric_filter(answers, on, outcome="duplicate"), by_job)],
        ),
        (
            "Held by another attempt (409 in_progress)",
            [series(metric_filter(answers, on, outcome="in_progress"), by_job)],
        ),
        (
            "Answers that ask for a retry (5xx)",
            [series(metric_filter(answers, on, outcome=outcome), by_job) for outcome in RETRY_OUTCOMES],
        ),
        ("Permanent failures (failed)", [series(metric_filter(answers, on, outcome="failed"), by_job)]),
        (
            f"Skipped by the overlap policy ({SKIPPED})",
            [series(metric_filter(answers, on, outcome=SKIPPED), by_job)],
        ),
        (
            f"Waiting for the run before (409 {WAITING})",
            [series(metric_filter(answers, on, outcome=WAITING), by_job)],
        ),
        (
            f"Excluded by the job's calendar ({EXCLUDED})",
            [series(metric_filter(answers, on, outcome=EXCLUDED), by_job)],
        ),
    ]
