"""Fixtures for the operators' command: a team file in a tmp folder, its ledger on the Firestore
emulator, its topics and dead-letter subscription on the Pub/Sub emulator, and the command run
through click's CliRunner."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import pytest
from click.testing import CliRunner, Result

from operate import clients
from operate.cli import runonce
from operate.team import TeamView, resolve
from runonce.core.store import Claim, Store
from runonce.scheduler.expected import scheduled_key
from runonce.store.firestore import Ledger, LedgerStore
from tests.conftest import PROJECT
from tests.events.conftest import PubSub

LEASE = timedelta(seconds=120)
TEAM_FILE = """
from stacks.team import EventJob, Job, Team

team = Team(
    name="{name}",
    project="{project}",
    region="europe-west1",
    collection="{collection}",
    jobs=[
        Job(name="report", schedule="*/10 * * * *", source="report"),
        Job(name="nightly", schedule="30 2 * * *", time_zone="Europe/Berlin", source="report"),
    ],
    event_jobs=[
        EventJob(name="orders", source="orders_events"),
        EventJob(name="paid", source="orders_events", trigger="eventarc"),
    ],
)
"""


@dataclass
class Ops:
    """One test's team and the ways to reach what the command reads."""

    team: TeamView
    store: Store
    """The team's ledger with a 120 s lease, for claiming runs as the library does."""
    folder: str

    def run(self, *args: str) -> Result:
        """The command's answer to `args` (stdout and stderr apart)."""
        return CliRunner().invoke(runonce, list(args), catch_exceptions=False)

    def scheduled_key(self, moment: datetime, job: str = "report") -> str:
        return scheduled_key(self.team.job(job).scheduler_job, moment, self.team.project, self.team.region)  # type: ignore[union-attr]

    def claim_scheduled(self, moment: datetime, forced: bool = False) -> Claim:
        """Claim the scheduled (or forced) run of `report` at `moment`, as the handler does."""
        job = self.team.jobs[0]
        key = self.scheduled_key(moment) if not forced else f"forced-{moment.isoformat()}"
        fields = {
            "job": job.scheduler_job,
            "schedule_time": moment.strftime("%Y-%m-%dT%H:%M:%SZ"),
            "forced": forced,
            "project": self.team.project,
            "location": self.team.region,
        }
        claim = self.store.claim(key, fields)
        assert isinstance(claim, Claim)
        return claim


@pytest.fixture
def ops(firestore_emulator, pubsub_emulator, tmp_path, monkeypatch, clock) -> Ops:
    """A fresh team (its own name and collection) whose file is the only one in RUNONCE_TEAMS_DIR."""
    name = f"t{uuid.uuid4().hex[:8]}"
    (tmp_path / f"{name}.py").write_text(
        TEAM_FILE.format(name=name, project=PROJECT, collection=f"ops_{uuid.uuid4().hex[:8]}")
    )
    monkeypatch.setenv("RUNONCE_TEAMS_DIR", str(tmp_path))
    team = resolve(name)
    ledger = clients.store(team).ledger  # type: ignore[attr-defined]
    store = LedgerStore(Ledger(ledger._client, team.collection, LEASE, timedelta(days=7)))
    return Ops(team, store, str(tmp_path))


class Topics:
    """The event job's topic (with a pull subscription that sees what a replay publishes) and its
    dead-letter topic and subscription, named as the stack names them."""

    def __init__(self, team: TeamView):
        from google.cloud import pubsub_v1

        self.job = team.event_jobs[0]
        self.publisher = pubsub_v1.PublisherClient()
        self.subscriber = pubsub_v1.SubscriberClient()
        self.replayed = self.job.topic.replace("/topics/", "/subscriptions/") + "-seen"
        for topic in (self.job.topic, self.job.dead_letter_topic):
            self.publisher.create_topic(request={"name": topic})
        self.subscriber.create_subscription(
            request={"name": self.job.dead_letter_subscription, "topic": self.job.dead_letter_topic}
        )
        self.subscriber.create_subscription(request={"name": self.replayed, "topic": self.job.topic})

    def dead_letter(self, data: bytes, attributes: dict[str, str]) -> str:
        """Publish a message to the dead-letter topic; its messageId."""
        return self.publisher.publish(self.job.dead_letter_topic, data, **attributes).result(timeout=30)

    def drain(self, subscription: str, expected: int = 0) -> list[Any]:
        """Pull and acknowledge what `subscription` holds (waiting for `expected` messages)."""
        return PubSub().pull(subscription, expected, timeout=15)


@pytest.fixture
def topics(ops) -> Topics:
    return Topics(ops.team)
