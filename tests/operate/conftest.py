"""Fixtures for the operators' command: a team file in a tmp folder, its ledger on the Firestore
emulator (or, where a module overrides `ledger_kind` with both stores, on the session's
redis-server, chosen by RUNONCE_STORE as a team's functions are given it), its topics and
dead-letter subscription on the Pub/Sub emulator, its scheduled jobs served under @deduplicated
with a stand-in for Cloud Scheduler's `jobs.run`, and the command run through click's CliRunner."""

from __future__ import annotations

import re
import threading
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

import flask
import pytest
from click.testing import CliRunner, Result

import runonce as library
from emulator.googleapis import GoogleApisStandIn
from operate.cli import runonce
from operate.rerun import SCHEDULER_URL_VARIABLE
from operate.team import ScheduledJob, TeamView, resolve
from runonce import _clock
from runonce.contract import OVERLAP_HEADER, STORE_VARIABLE
from runonce.core.store import Claim, Store
from runonce.scheduler.expected import next_time, scheduled_key
from runonce.store.firestore import Ledger, LedgerStore
from tests.conftest import PROJECT
from tests.events.conftest import PubSub
from tests.store.conftest import valkey_server  # noqa: F401  (the session's server, for teams on Valkey)
from tests.store.valkey_server import ValkeyServer

LEASE = timedelta(seconds=120)
RETENTION = timedelta(days=7)
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
    api: GoogleApisStandIn
    """Cloud Scheduler's API, where `runs` and `show` read each scheduled job's state: every job
    of the team ENABLED, deployed long before the tests' runs."""

    def run(self, *args: str) -> Result:
        """The command's answer to `args` (stdout and stderr apart)."""
        return CliRunner().invoke(runonce, list(args), catch_exceptions=False)

    def scheduled_key(self, moment: datetime, job: str = "report") -> str:
        return scheduled_key(self.team.job(job).scheduler_job, moment, self.team.project, self.team.region)  # type: ignore[union-attr]

    def claim_scheduled(self, moment: datetime) -> Claim:
        """Claim the scheduled run of `report` at `moment`, as the handler does for its delivery."""
        job = self.team.jobs[0]
        key = self.scheduled_key(moment)
        fields = {
            "job": job.scheduler_job,
            "schedule_time": moment.strftime("%Y-%m-%dT%H:%M:%SZ"),
            "forced": False,
            "project": self.team.project,
            "location": self.team.region,
        }
        claim = self.store.claim(key, fields)
        assert isinstance(claim, Claim)
        return claim


ON_BOTH_STORES = ("firestore", "valkey")
"""`ledger_kind`'s values in a module whose tests run on both stores."""


@pytest.fixture
def ledger_kind() -> str:
    """The store of the team's runs: Firestore, unless a module overrides this fixture with
    `params=ON_BOTH_STORES`."""
    return "firestore"


@pytest.fixture
def ops(firestore_emulator, pubsub_emulator, tmp_path, monkeypatch, clock, ledger_kind, request) -> Ops:
    """A fresh team (its own name and collection) whose file is the only one in RUNONCE_TEAMS_DIR."""
    name = f"t{uuid.uuid4().hex[:8]}"
    (tmp_path / f"{name}.py").write_text(
        TEAM_FILE.format(name=name, project=PROJECT, collection=f"ops_{uuid.uuid4().hex[:8]}")
    )
    monkeypatch.setenv("RUNONCE_TEAMS_DIR", str(tmp_path))
    team = resolve(name)
    ledgers = team_ledgers(ledger_kind, request, team.database, team.collection, monkeypatch, clock)
    api = GoogleApisStandIn().start()
    request.addfinalizer(api.stop)
    deployed(api, team)
    monkeypatch.setenv(SCHEDULER_URL_VARIABLE, api.url)
    return Ops(team, ledgers(LEASE), str(tmp_path), api)


def deployed(api: GoogleApisStandIn, team: TeamView) -> None:
    """Every scheduled job of `team` in Scheduler's stand-in, ENABLED, as `jobs.get` answers it:
    deployed long before the tests' runs."""
    for job in team.jobs:
        name = f"projects/{team.project}/locations/{job.location}/jobs/{job.scheduler_job}"
        api._store(
            {
                "name": name,
                "schedule": job.schedule,
                "state": "ENABLED",
                "userUpdateTime": "2026-01-01T00:00:00Z",
            }
        )


def team_ledgers(
    kind: str, request: Any, database: str, collection: str, monkeypatch: Any, clock: Callable[[], datetime]
) -> Callable[[timedelta], Store]:
    """`open(lease)`: the team's ledger on `kind`'s store, claiming under `lease`. Firestore: the
    emulator's database `database`, RUNONCE_STORE unset. Valkey: the session's server, named by
    RUNONCE_STORE as the team's functions and its operators are given it; every Valkey store
    opened from then on (the command's, a served job's) is on the test's clock, the store's test
    hook, so leases end as the test moves its clock (any other store is opened as it is)."""
    if kind == "firestore":
        from google.cloud import firestore

        request.getfixturevalue("firestore_emulator")
        monkeypatch.delenv(STORE_VARIABLE, raising=False)
        client = firestore.Client(project=PROJECT, database=database)
        return lambda lease: LedgerStore(Ledger(client, collection, lease, RETENTION))
    import valkey

    from runonce.store import connection
    from runonce.store.valkey import ValkeyStore

    server: ValkeyServer = request.getfixturevalue("valkey_server")
    url = f"valkey://127.0.0.1:{server.port}"
    monkeypatch.setenv(STORE_VARIABLE, url)
    opened = connection.open_store

    def on_the_clock(store: str, collection: str, lease: timedelta, retention: timedelta, *rest: Any) -> Any:
        if store != url:
            return opened(store, collection, lease, retention, *rest)
        client = valkey.Valkey(port=server.port, decode_responses=True, socket_timeout=10)
        return ValkeyStore(client, collection, lease, retention, clock=clock)

    monkeypatch.setattr(connection, "open_store", on_the_clock)
    return lambda lease: on_the_clock(url, collection, lease, RETENTION)


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


def scheduler_headers(team: TeamView, job: ScheduledJob, moment: datetime | None) -> dict[str, str]:
    """What Cloud Scheduler sends for `job` (the stack's headers included), carrying ScheduleTime
    `moment`, or no ScheduleTime at all (`None`, as a forced run may come)."""
    headers = {
        "User-Agent": "Google-Cloud-Scheduler",
        "X-CloudScheduler": "true",
        "X-CloudScheduler-JobName": job.scheduler_job,
        "X-Runonce-Project": team.project,
        "X-Runonce-Location": job.location,
    }
    if moment is not None:
        headers["X-CloudScheduler-ScheduleTime"] = moment.strftime("%Y-%m-%dT%H:%M:%SZ")
    return headers


_JOB_RUN = re.compile(r"/v1/projects/[^/]+/locations/[^/]+/jobs/(?P<job>[^/:]+):run$")


@dataclass
class Served:
    """The team's scheduled jobs under @deduplicated on its ledger (served by Flask), and a
    stand-in for Cloud Scheduler's API whose `jobs.run` delivers what Scheduler delivers for a
    forced run (the job's next scheduled time) before it answers."""

    ops: Ops
    app: flask.Flask
    api: GoogleApisStandIn
    behaviour: Callable[[], object] = lambda: {"rows": 1}
    """How the job body ends (return a result, raise PermanentError...)."""
    overlap: str | None = None
    """The overlap policy the Scheduler jobs' headers carry (`wait`, `skip`), if any."""
    answers: list[dict[str, Any]] = field(default_factory=list)
    runs: list[library.Run] = field(default_factory=list)

    def deliver(self, job: str, moment: datetime | None) -> dict[str, Any]:
        """Deliver `job`'s run carrying ScheduleTime `moment` (None: no ScheduleTime); its answer."""
        scheduled = self.ops.team.job(job)
        assert isinstance(scheduled, ScheduledJob)
        headers = scheduler_headers(self.ops.team, scheduled, moment)
        if self.overlap is not None:
            headers[OVERLAP_HEADER] = self.overlap
        # A client per delivery: deliveries may run on several threads at once.
        answer = self.app.test_client().post("/", headers=headers)
        body = {**(answer.json or {}), "status_code": answer.status_code}
        self.answers.append(body)
        return body

    def force(self, job: str) -> dict[str, Any]:
        """A "Force run" of `job` now: a delivery carrying the job's next scheduled time."""
        scheduled = self.ops.team.job(job)
        assert isinstance(scheduled, ScheduledJob)
        return self.deliver(job, next_time(scheduled.schedule, scheduled.time_zone, _clock.now()))

    def dispatched(self, resource: dict[str, Any]) -> None:
        """The stand-in's `jobs.run`: force the job its last call named."""
        match = _JOB_RUN.search(self.api.calls[-1].path)
        assert match, self.api.calls[-1].path
        name = next(job.name for job in self.ops.team.jobs if job.scheduler_job == match["job"])
        self.force(name)


@pytest.fixture
def served(ops) -> Iterator[Served]:
    """`ops`' team served, and its Scheduler stand-in's `jobs.run` delivering a forced run."""
    lock = threading.Lock()
    holder: list[Served] = []

    def body(request: flask.Request) -> object:
        with lock:
            holder[0].runs.append(library.current_run())  # type: ignore[arg-type]
        return holder[0].behaviour()

    # On Firestore, the emulator's client (its project); on Valkey, RUNONCE_STORE names the store.
    client = ops.store.ledger._client if isinstance(ops.store, LedgerStore) else None
    handler = library.deduplicated(collection=ops.team.collection, client=client, lease=120)(body)
    app = flask.Flask(f"served-{uuid.uuid4().hex[:6]}")
    app.add_url_rule("/", "handle", lambda: handler(flask.request._get_current_object()), methods=["POST"])
    served = Served(ops, app, ops.api)
    holder.append(served)
    ops.api.on_start = served.dispatched
    yield served
