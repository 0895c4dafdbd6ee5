"""A project created for this test, never used before: the sandbox stack applies in one pass,
and again in one pass after a destroy.

A fresh project is where the first-deploy defects live: service agents that do not exist yet
(Eventarc's, Cloud Storage's), APIs just enabled, grants not yet in force. Besides the two
applies, the test publishes to the Eventarc job's topic from the moment the trigger's
subscription exists, all through the apply, and then requires every such message to have run
once and none to have been refused by the function (a 403 means the trigger delivered before its
account could invoke the function); and an upload right after the apply runs once.

Needs RUNONCE_SANDBOX_PARENT and RUNONCE_SANDBOX_BILLING_ACCOUNT; the project is deleted at the
end (Google keeps a deleted project 30 days before removing it).
"""

from __future__ import annotations

import os
import threading
import uuid
from datetime import UTC, datetime, timedelta
from functools import partial

import pytest

from stacks import naming
from stacks.team import REPO_ROOT
from tests.sandbox import teams
from tests.sandbox.cloud import (
    PUBSUB,
    PubSub,
    create_project,
    delete_project,
    log_entries,
    rfc3339,
    upload,
)
from tests.sandbox.conftest import terraform_runner
from tests.sandbox.effects import message_entries, uploaded_object_entries
from tests.sandbox.stack import SERVICE_OUTPUT, synthesize
from tests.sandbox.variables import FRESH_PROJECT_VARIABLES, region
from tests.sandbox.waiting import wait_for

pytestmark = pytest.mark.sandbox(needs=FRESH_PROJECT_VARIABLES)

FRESH = "fresh"
"""The team name in the fresh project (its own stack folder and state, apart from the sandbox's)."""
FRESH_OUT = REPO_ROOT / "build" / "sandbox-fresh"
PUBLISH_EVERY = 15
# Eventarc retries a refused event with backoff up to 600 s: room for a few of those.
EARLY_DELIVERY_WITHIN = 20 * 60
DELIVERY_WITHIN = 5 * 60
CLOCK_MARGIN = timedelta(minutes=1)


class EarlyPublisher:
    """Publishes a new marked message to a topic every `PUBLISH_EVERY` seconds from the moment
    the topic has a subscription (messages published before it would never reach it) until
    stopped; `published` holds the data of every message Pub/Sub accepted."""

    def __init__(self, pubsub: PubSub, topic: str) -> None:
        self.pubsub = pubsub
        self.topic = topic
        self.published: list[str] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _subscribed(self) -> bool:
        answer = self.pubsub.session.get(f"{PUBSUB}/{self.topic}/subscriptions", timeout=60)
        return answer.ok and bool(answer.json().get("subscriptions"))

    def _run(self) -> None:
        while not self._stop.wait(PUBLISH_EVERY):
            data = uuid.uuid4().hex
            try:
                if self._subscribed():
                    self.pubsub.publish(self.topic, data.encode())
                    self.published.append(data)
            except (AssertionError, OSError):
                continue  # the topic or its subscription is not there yet, or a call failed

    def __enter__(self) -> EarlyPublisher:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()


@pytest.fixture
def fresh_place(session):
    """A new project under RUNONCE_SANDBOX_PARENT, billed to RUNONCE_SANDBOX_BILLING_ACCOUNT,
    deleted after the test."""
    project = f"runonce-fresh-{uuid.uuid4().hex[:8]}"
    create_project(
        session, project, os.environ["RUNONCE_SANDBOX_PARENT"], os.environ["RUNONCE_SANDBOX_BILLING_ACCOUNT"]
    )
    yield teams.SandboxPlace(project, region(), team=FRESH)
    delete_project(session, project)


def check_first_events(session, team, state, publisher: EarlyPublisher, applied_at: datetime) -> None:
    """Every message published during the apply ran once, and the function refused none."""
    assert publisher.published, "the Eventarc topic never had a subscription during the apply"
    for data in publisher.published:
        entries = wait_for(partial(message_entries, team, data), bool, within=EARLY_DELIVERY_WITHIN)
        assert len(entries) == 1, f"message {data}: {len(entries)} effects"
    service = state.outputs[SERVICE_OUTPUT.format(teams.MESSAGES)]["value"]
    refused = log_entries(
        session,
        team.project,
        f'resource.type="cloud_run_revision" AND resource.labels.service_name="{service}" '
        f'AND httpRequest.status=403 AND timestamp>="{rfc3339(applied_at)}"',
    )
    assert not refused, (
        f"{len(refused)} deliveries refused with 403, the first at {refused[0].get('timestamp')}"
    )


def check_upload(session, team, place) -> None:
    """An upload right after the apply runs the bucket's Eventarc job once."""
    name = f"fresh/{uuid.uuid4().hex}.txt"
    upload(session, place.upload_bucket, name, b"uploaded by the fresh project test")
    entries = wait_for(lambda: uploaded_object_entries(team, name), bool, within=DELIVERY_WITHIN)
    assert len(entries) == 1, f"{len(entries)} effects for one upload within {DELIVERY_WITHIN} s"


def test_a_fresh_project_applies_in_one_pass_and_again_after_a_destroy(fresh_place, session, tmp_path):
    team = teams.sandbox_team(fresh_place)
    synthesize(team, fresh_place, FRESH_OUT)
    runner = terraform_runner(FRESH_OUT / "stacks" / FRESH, tmp_path / "work")
    runner.init()
    topic = naming.topic_path(team.project, naming.topic_name(team.name, teams.MESSAGES))
    applied_at = datetime.now(UTC) - CLOCK_MARGIN
    # One pass: the runner raises if any resource fails (and destroys what was created).
    with EarlyPublisher(PubSub(session), topic) as publisher:
        state = runner.apply()
    try:
        check_first_events(session, team, state, publisher, applied_at)
        check_upload(session, team, fresh_place)
    finally:
        runner.destroy()
    # The same project after a destroy: what the destroy left behind must not break an apply.
    runner.apply()
    try:
        check_upload(session, team, fresh_place)
    finally:
        runner.destroy()
