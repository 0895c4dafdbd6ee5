"""The deployed sandbox team's event jobs, judged by their effects: a published message or an
uploaded object runs its body once; a message that fails permanently, and one that arrives too
old, reach the dead-letter subscription with runonce's reason; a message whose first instance
dies mid-run is still run once (Pub/Sub's redeliveries outlast the lease the dead attempt
holds); and an Eventarc job's maximum event age is shorter than its trigger subscription keeps
an undelivered event."""

from __future__ import annotations

import time
import uuid
from datetime import UTC, datetime, timedelta

import pytest

from runonce.contract import (
    DEAD_LETTER_REASON_FIELD,
    MAX_EVENT_AGE_VARIABLE,
    BodyEnd,
    BodyStage,
    DeadLetterReason,
    RunStatus,
)
from runonce.core.event import Event
from runonce.events.parse import event_key
from stacks import naming
from stacks.team import EventJob, Team
from tests.sandbox import teams
from tests.sandbox.cloud import PubSub, eventarc_trigger, function, upload
from tests.sandbox.dead_letters import DeadLetter
from tests.sandbox.effects import (
    body_lines,
    ledger_record,
    message_entries,
    outbox_entry,
    uploaded_object_entries,
)
from tests.sandbox.waiting import wait_for

pytestmark = pytest.mark.sandbox

TOKEN = "sandbox_token"
"""The attribute each test marks its message with; dead-letter copies keep the attributes."""
# A fresh function's first delivery includes a cold start.
DELIVERY_WITHIN = 5 * 60
DEAD_LETTER_SETTLE = 30
CLOCK_MARGIN = timedelta(minutes=1)


class DeadLetterBox:
    """Every dead letter pulled in the session, by subscription: each pull acknowledges what it
    took, so letters another test is waiting for are kept here for it."""

    def __init__(self, pubsub: PubSub) -> None:
        self.pubsub = pubsub
        self.letters: dict[str, list[DeadLetter]] = {}

    def marked(self, subscription: str, token: str) -> list[DeadLetter]:
        """The letters of `subscription` marked with `token`, after pulling what is there now."""
        kept = self.letters.setdefault(subscription, [])
        kept.extend(self.pubsub.take_dead_letters(subscription))
        return [letter for letter in kept if letter.copy.attributes.get(TOKEN) == token]

    def wait(self, subscription: str, token: str, within: float) -> list[DeadLetter]:
        """The letters marked with `token`: waits for the first, then a while for any second."""
        if wait_for(lambda: self.marked(subscription, token), bool, within=within, every=15):
            time.sleep(DEAD_LETTER_SETTLE)
        return self.marked(subscription, token)


@pytest.fixture(scope="session")
def pubsub(session) -> PubSub:
    """Pub/Sub of the sandbox project."""
    return PubSub(session)


@pytest.fixture(scope="session")
def dead_letters(pubsub) -> DeadLetterBox:
    """The session's dead letters."""
    return DeadLetterBox(pubsub)


def event_job(team: Team, name: str) -> EventJob:
    """The team's event job by name."""
    [job] = [job for job in team.event_jobs if job.name == name]
    return job


def publish(pubsub: PubSub, team: Team, job: str, data: bytes, **attributes: str) -> tuple[str, str]:
    """Publish to the job's topic, marked with a new token; (messageId, token)."""
    token = uuid.uuid4().hex
    topic = naming.topic_path(team.project, naming.topic_name(team.name, job))
    return pubsub.publish(topic, data, {**attributes, TOKEN: token}), token


def push_key(team: Team, job: str, message_id: str) -> str:
    """The run key runonce gives the message pushed by the job's push subscription."""
    subscription = f"projects/{team.project}/subscriptions/{naming.push_subscription_name(team.name, job)}"
    return event_key(Event(id=message_id, source=subscription, time=None))


def dead_letter_subscription(team: Team, job: str) -> str:
    """The job's dead-letter pull subscription, by its full name."""
    return f"projects/{team.project}/subscriptions/{naming.dead_letter_subscription_name(team.name, job)}"


def effect(team: Team, key: str) -> dict | None:
    """What functions/events_example wrote for the run key, or None."""
    return outbox_entry(team, teams.EVENTS_OUTBOX, key)


def assert_ran_once(session, team: Team, key: str, started: datetime) -> None:
    """The run is recorded completed, and its body started exactly once since `started`."""
    assert (ledger_record(team, key) or {}).get("status") == RunStatus.COMPLETED.value
    assert body_lines(session, team, key, started) == 1


def test_a_published_message_runs_once(deployed, sandbox_team, session, pubsub):
    started = datetime.now(UTC) - CLOCK_MARGIN
    message_id, _ = publish(pubsub, sandbox_team, teams.PUSHED, b'{"order": "sandbox-1"}')
    key = push_key(sandbox_team, teams.PUSHED, message_id)

    entry = wait_for(lambda: effect(sandbox_team, key), bool, within=DELIVERY_WITHIN)
    assert entry, f"no effect within {DELIVERY_WITHIN} s; ledger record: {ledger_record(sandbox_team, key)}"
    assert entry["message_id"] == message_id
    assert (ledger_record(sandbox_team, key) or {}).get("status") == RunStatus.COMPLETED.value
    assert body_lines(session, sandbox_team, key, started) == 1


def test_a_message_that_fails_permanently_is_dead_lettered_with_its_reason(
    deployed, sandbox_team, pubsub, dead_letters
):
    message_id, token = publish(pubsub, sandbox_team, teams.PUSHED, b"{}", fault="permanent")
    key = push_key(sandbox_team, teams.PUSHED, message_id)

    letters = dead_letters.wait(dead_letter_subscription(sandbox_team, teams.PUSHED), token, DELIVERY_WITHIN)
    [letter] = letters
    assert letter.reason == DeadLetterReason.PERMANENT_FAILURE.value and not letter.by_pubsub
    assert (letter.run_key, letter.original_id, letter.original.data) == (key, message_id, b"{}")
    record = ledger_record(sandbox_team, key) or {}
    assert record.get("status") == RunStatus.FAILED.value
    assert record.get(DEAD_LETTER_REASON_FIELD) == DeadLetterReason.PERMANENT_FAILURE.value
    assert effect(sandbox_team, key) is None


def test_a_message_redelivered_after_the_maximum_age_is_dead_lettered_as_too_old(
    deployed, sandbox_team, pubsub, dead_letters
):
    # The first body fails (retryable); Pub/Sub redelivers it 60 s later, past the 30 s age.
    message_id, token = publish(pubsub, sandbox_team, teams.STALE, b"{}", fault="retryable")
    key = push_key(sandbox_team, teams.STALE, message_id)
    within = DELIVERY_WITHIN + teams.STALE_FIRST_REDELIVERY_SECONDS

    [letter] = dead_letters.wait(dead_letter_subscription(sandbox_team, teams.STALE), token, within)
    assert letter.reason == DeadLetterReason.TOO_OLD.value and not letter.by_pubsub
    assert (letter.run_key, letter.original_id) == (key, message_id)
    assert (ledger_record(sandbox_team, key) or {}).get(
        DEAD_LETTER_REASON_FIELD
    ) == DeadLetterReason.TOO_OLD.value
    assert effect(sandbox_team, key) is None


def test_a_message_whose_instance_dies_mid_run_is_run_once_after_the_lease(
    deployed, sandbox_team, session, pubsub, dead_letters
):
    # The first body's instance dies before the effect, holding the claim for the lease; every
    # redelivery meanwhile is answered 409. Pub/Sub must still be redelivering when it expires.
    job = event_job(sandbox_team, teams.PUSHED)
    started = datetime.now(UTC) - CLOCK_MARGIN
    message_id, token = publish(pubsub, sandbox_team, teams.PUSHED, b"{}", fault="kill_before_effect")
    key = push_key(sandbox_team, teams.PUSHED, message_id)
    within = DELIVERY_WITHIN + job.lease_seconds + job.retry.max_backoff_seconds

    entry = wait_for(lambda: effect(sandbox_team, key), bool, within=within)
    lost = dead_letters.marked(dead_letter_subscription(sandbox_team, teams.PUSHED), token)
    assert entry, f"not run within {within} s; dead letters: {[letter.copy.attributes for letter in lost]}"
    assert not lost
    record = ledger_record(sandbox_team, key) or {}
    assert record.get("status") == RunStatus.COMPLETED.value and record.get("attempts", 0) >= 2, record
    # One body ended, and succeeded: the one that took over after the lease (the first one's
    # instance died before it could log an end).
    ended = body_lines(session, sandbox_team, key, started, BodyStage.ENDED)
    assert (
        ended == 1
        and body_lines(session, sandbox_team, key, started, BodyStage.ENDED, BodyEnd.SUCCEEDED) == 1
    )


def test_an_uploaded_object_runs_the_eventarc_job_once(deployed, sandbox_team, sandbox_place, session):
    started = datetime.now(UTC) - CLOCK_MARGIN
    name = f"sandbox/{uuid.uuid4().hex}.txt"
    upload(session, sandbox_place.upload_bucket, name, b"uploaded by the sandbox suite")

    entries = wait_for(lambda: uploaded_object_entries(sandbox_team, name), bool, within=DELIVERY_WITHIN)
    assert len(entries) == 1, f"{len(entries)} effects for one upload within {DELIVERY_WITHIN} s"
    assert_ran_once(session, sandbox_team, entries[0]["run_key"], started)


def test_a_message_on_the_topic_runs_the_eventarc_job_once(deployed, sandbox_team, session, pubsub):
    started = datetime.now(UTC) - CLOCK_MARGIN
    data = uuid.uuid4().hex
    publish(pubsub, sandbox_team, teams.MESSAGES, data.encode())

    entries = wait_for(lambda: message_entries(sandbox_team, data), bool, within=DELIVERY_WITHIN)
    assert len(entries) == 1, f"{len(entries)} effects for one message within {DELIVERY_WITHIN} s"
    assert_ran_once(session, sandbox_team, entries[0]["run_key"], started)


def seconds(duration: str) -> float:
    """A protobuf Duration in its JSON form ("86400s", "3.5s") in seconds."""
    assert duration.endswith("s"), duration
    return float(duration[:-1])


@pytest.mark.parametrize("job", [teams.UPLOADS, teams.MESSAGES])
def test_an_eventarc_jobs_maximum_age_is_shorter_than_its_trigger_keeps_an_event(
    deployed, sandbox_team, session, pubsub, job
):
    # An event that keeps failing must be dead-lettered as too old before the trigger's
    # subscription drops it at the end of its retention, or it vanishes without a trace.
    deployed_function = function(
        session, sandbox_team.project, sandbox_team.region, naming.function_name(sandbox_team.name, job)
    )
    max_age = int(deployed_function["serviceConfig"]["environmentVariables"][MAX_EVENT_AGE_VARIABLE])
    trigger = eventarc_trigger(session, deployed_function["eventTrigger"]["trigger"])
    subscription = pubsub.subscription(trigger["transport"]["pubsub"]["subscription"])
    retention = seconds(subscription["messageRetentionDuration"])
    assert max_age < retention, (max_age, retention)
