"""Signal: events that did not run. The copies runonce forwarded to a dead-letter topic, the
dead letters nobody has handled, and push subscriptions whose backlog ages."""

from __future__ import annotations

from stacks.constructs.monitoring.alerts import Alerting, threshold
from stacks.constructs.monitoring.dashboard import Chart, series
from stacks.constructs.monitoring.filters import (
    ALIGNMENT,
    DEAD_LETTER_OUTCOMES,
    DEAD_LETTERED,
    any_of,
    subscription_filter,
)
from stacks.constructs.monitoring.props import WatchedEvents

LABELS = {
    "job": "The event job",
    "outcome": "The answer that sent it: failed, too_old, or duplicate (sent late)",
}
"""The dead-letter copies metric's labels and their descriptions."""


def alert_dead_lettered(alerting: Alerting, lines: str) -> None:
    """An ERROR on every copy forwarded (or that could not be), among `lines` (the event jobs'
    runonce lines)."""
    team = alerting.props.team
    alerting.log_match(
        "dead-lettered",
        "an event was dead-lettered",
        "ERROR",
        f"{lines} AND ({DEAD_LETTERED} OR {any_of('jsonPayload.outcome', DEAD_LETTER_OUTCOMES)})",
        ["job", "outcome"],
        f"An event of job `JOB` (the notification's `job` label) did not run: it was too old "
        f"(`too_old`) or its job failed permanently (`permanent_failure`), and runonce "
        f"forwarded it to the dead-letter topic, or could not (`dead_letter_failed`: the event "
        f"is redelivered until forwarding works).\n\n"
        f"1. See the copies and their reasons: `runonce dead-letters --team {team} --job JOB`.\n"
        f"2. Once the cause is fixed, publish one back once: `runonce replay COPY_ID --team {team}`.",
    )


def alert_backlog(alerting: Alerting, events: WatchedEvents) -> None:
    """A WARNING while the job's dead-letter subscription holds messages, and for a push job a
    CRITICAL once its oldest unacknowledged message is older than `oldest_unacked_seconds`."""
    team = alerting.props.team
    alerting.policy(
        f"{events.job}-dead-letter-backlog",
        f"dead letters waiting for {events.job}",
        "WARNING",
        [
            threshold(
                subscription_filter("num_undelivered_messages", events.dead_letter_subscription),
                "undelivered dead letters",
                "0s",
                0,
                "ALIGN_MAX",
                ALIGNMENT,
            )
        ],
        f"The dead-letter subscription `{events.dead_letter_subscription}` holds messages no one "
        f"has handled (they are kept 7 days).\n\n"
        f"1. See them: `runonce dead-letters --team {team} --job {events.job}`.\n"
        f"2. Replay each once its cause is fixed: `runonce replay COPY_ID --team {team}`.",
    )
    if not events.push_subscription:
        return
    age = _duration(events.oldest_unacked_seconds)
    alerting.policy(
        f"{events.job}-push-backlog",
        f"events of {events.job} unacknowledged for {age}",
        "CRITICAL",
        [
            threshold(
                subscription_filter("oldest_unacked_message_age", events.push_subscription),
                f"oldest unacknowledged message older than {events.oldest_unacked_seconds} s",
                "0s",
                events.oldest_unacked_seconds,
                "ALIGN_MAX",
                ALIGNMENT,
            )
        ],
        f"The push subscription `{events.push_subscription}` has a message unacknowledged "
        f"for over {age}: half of the time Pub/Sub keeps redelivering it is gone, and "
        f"it is lost when the rest is.\n\n"
        f"1. See the job's recent runs and their answers: "
        f"`runonce runs --team {team} --job {events.job}`.\n"
        f"2. Read one that keeps answering 409 or 5xx: `runonce show KEY --team {team}`.",
    )


def chart(events: list[WatchedEvents]) -> Chart:
    """The dead-letter backlog of every event job."""
    return (
        "Dead-letter backlog",
        [
            series(
                subscription_filter("num_undelivered_messages", watched.dead_letter_subscription),
                ["resource.label.subscription_id"],
                aligner="ALIGN_MAX",
                reducer="REDUCE_MAX",
            )
            for watched in events
        ],
    )


def _duration(seconds: int) -> str:
    """Whole hours as "12 h", anything else in minutes ("90 min"), for titles."""
    return f"{seconds // 3600} h" if seconds % 3600 == 0 else f"{seconds / 60:g} min"
