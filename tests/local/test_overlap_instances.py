"""Overlap policies end to end (docs/schedules/overlap.md): deliveries built by the local Scheduler
(`scheduler_headers`, which sends X-Runonce-Overlap from the team file's `Job.overlap`) to real
functions-framework instances on the Firestore emulator, under faults: an instance killed while its
run holds the job, answers lost to the attempt deadline, retries.

Every body start and every effect (one document per run key) is written by the job itself, so the
counts below are what really ran, not what runonce says.
"""

from __future__ import annotations

import threading
import time
import uuid
from datetime import UTC, datetime, timedelta

import pytest
from google.cloud import firestore
from google.cloud.firestore_v1.base_query import FieldFilter

from localscheduler.clock import AcceleratedClock
from localscheduler.hosts.pool import KILL_HEADER, InstancePool
from localscheduler.scheduler.delivery import Answer, scheduler_headers
from runonce.contract import OVERLAP_HEADER, SKIPPED_FOR_FIELD, Overlap
from runonce.scheduler.expected import scheduled_key
from stacks.naming import scheduler_job_name
from stacks.team import Job, Retry, Team

JOB_SOURCE = """
import os
import time

import functions_framework
from google.api_core.exceptions import AlreadyExists
from google.cloud import firestore

from runonce import current_run, deduplicated

BODIES = os.environ["TEST_BODIES"]


@functions_framework.http
@deduplicated
def handle(request):
    run = current_run()
    db = firestore.Client()
    db.collection(BODIES).add({"run": run.key, "attempt": run.attempt, "at": time.time()})
    time.sleep(float(request.headers.get("X-Test-Sleep", "0")))
    try:
        db.collection(BODIES + "_effects").document(run.key).create({"at": time.time()})
    except AlreadyExists:
        pass
    return "done"
"""
NOW = datetime(2026, 1, 1, 0, 10, tzinfo=UTC)
"""Where the instances' clock starts (rate 1): both runs below are due."""
FIRST, SECOND = NOW - timedelta(minutes=10), NOW - timedelta(minutes=5)
LEASE_SECONDS = 4
RETRY = Retry(retry_count=5, min_backoff_seconds=1, max_backoff_seconds=10, max_doublings=3)


def _job(name: str, overlap: Overlap) -> Job:
    return Job(
        name=name,
        schedule="*/5 * * * *",
        entry_point="handle",
        timeout_seconds=30,
        attempt_deadline_seconds=15,
        retry=RETRY,
        overlap=overlap,
    )


TEAM = Team(
    name="overlap",
    project="runonce-local",
    region="europe-west1",
    jobs=[_job("skipper", Overlap.SKIP), _job("waiter", Overlap.WAIT)],
)


@pytest.fixture(scope="module")
def bodies() -> str:
    return f"overlap_bodies_{uuid.uuid4().hex[:8]}"


@pytest.fixture(scope="module")
def pool(firestore_emulator, tmp_path_factory, bodies):
    folder = tmp_path_factory.mktemp("overlap-job")
    (folder / "main.py").write_text(JOB_SOURCE)
    clock_file = folder / "clock"
    clock_file.write_text(AcceleratedClock.starting_now(NOW, 1.0).spec())
    env = {
        "FIRESTORE_EMULATOR_HOST": firestore_emulator.host,
        "GOOGLE_CLOUD_PROJECT": "runonce-local",
        "RUNONCE_LOCAL_CLOCK_FILE": str(clock_file),
        "RUNONCE_LEASE_SECONDS": str(LEASE_SECONDS),
        "RUNONCE_COLLECTION": f"{bodies}_ledger",
        "TEST_BODIES": bodies,
    }
    pool = InstancePool("overlap", folder / "main.py", "handle", 2, env, folder / "logs")
    yield pool.start()
    pool.stop()


@pytest.fixture
def db(firestore_emulator) -> firestore.Client:
    return firestore.Client(project="runonce-local")


def _job_named(name: str) -> Job:
    return next(job for job in TEAM.jobs if job.name == name)


def _key(job: Job, moment: datetime) -> str:
    return scheduled_key(scheduler_job_name(TEAM.name, job.name), moment, TEAM.project, TEAM.region)


def _send(pool: InstancePool, job: Job, moment: datetime, deadline: float = 10.0, **extra: str) -> Answer:
    return pool.post("/", {**scheduler_headers(TEAM, job, moment), **extra}, deadline, wait=30.0)


def _until_2xx(pool: InstancePool, job: Job, moment: datetime, **options) -> list[Answer]:
    """Scheduler's retries: again every half second until an answer is a 2xx."""
    answers = [_send(pool, job, moment, **options)]
    while not answers[-1].ok and len(answers) < 60:
        time.sleep(0.5)
        answers.append(_send(pool, job, moment, **options))
    assert answers[-1].ok, [answer.outcome for answer in answers]
    return answers


def _starts(db: firestore.Client, bodies: str, key: str) -> list[dict]:
    query = db.collection(bodies).where(filter=FieldFilter("run", "==", key))
    found = [doc.to_dict() for doc in query.stream()]
    return sorted(found, key=lambda body: body["at"])


def _effect(db: firestore.Client, bodies: str, key: str) -> dict | None:
    snapshot = db.collection(f"{bodies}_effects").document(key).get()
    return snapshot.to_dict() if snapshot.exists else None


def test_the_local_scheduler_sends_the_policy_of_a_job_that_is_not_allow():
    allow = _job("plain", Overlap.ALLOW)
    assert OVERLAP_HEADER not in scheduler_headers(TEAM, allow, FIRST)
    assert scheduler_headers(TEAM, _job_named("skipper"), FIRST)[OVERLAP_HEADER] == "skip"
    assert scheduler_headers(TEAM, _job_named("waiter"), FIRST)[OVERLAP_HEADER] == "wait"


def test_two_runs_of_a_skip_job_under_a_kill_lost_answers_and_retries_give_one_effect_and_one_skipped_record(
    pool, db, bodies
):
    job = _job_named("skipper")
    first, second = _key(job, FIRST), _key(job, SECOND)
    # The first run's instance dies while its body runs: its claim, and the job, stay held.
    killed = _send(pool, job, FIRST, **{KILL_HEADER: first})
    assert killed.error == "connection", killed
    # The next run is delivered within the dead holder's lease: recorded skipped, answered 2xx.
    skipped = _send(pool, job, SECOND)
    assert (skipped.status, skipped.body["outcome"], skipped.body["skipped_for"]) == (200, "skipped", first)
    assert _send(pool, job, SECOND).body["status"] == "skipped"  # a duplicate delivery of it
    # The first run's retries: 409 until its lease ends, then one takes it over; its answer is
    # lost (the body outlasts the deadline), so the retries go on until one is told it completed.
    answers = _until_2xx(pool, job, FIRST, deadline=0.5, **{"X-Test-Sleep": "1.5"})
    outcomes = [answer.outcome for answer in answers]
    assert "deadline" in outcomes and outcomes[-1] == "duplicate", outcomes
    later = _send(pool, job, SECOND)
    assert (later.status, later.body["outcome"], later.body["status"]) == (200, "duplicate", "skipped")

    # Attempt 1 died as its body started (before the body's first write); attempt 2 took it over.
    assert [body["attempt"] for body in _starts(db, bodies, first)] == [2]
    assert _effect(db, bodies, first) is not None
    assert _starts(db, bodies, second) == [] and _effect(db, bodies, second) is None
    ledger = db.collection(f"{bodies}_ledger")
    assert {name: ledger.document(first).get().to_dict()[name] for name in ("status", "attempts")} == {
        "status": "completed",
        "attempts": 2,
    }
    record = ledger.document(second).get().to_dict()
    assert (record["status"], record[SKIPPED_FOR_FIELD]) == ("skipped", first)


def test_a_wait_jobs_second_run_runs_after_the_first_once(pool, db, bodies):
    job = _job_named("waiter")
    first, second = _key(job, FIRST), _key(job, SECOND)
    running: list[Answer] = []
    thread = threading.Thread(target=lambda: running.append(_send(pool, job, FIRST, **{"X-Test-Sleep": "3"})))
    thread.start()
    deadline = time.monotonic() + 30
    while not _starts(db, bodies, first):
        assert time.monotonic() < deadline, "the first run's body never started"
        time.sleep(0.1)
    answers = _until_2xx(pool, job, SECOND)
    thread.join(30)
    assert running[0].body["outcome"] == "completed"
    assert answers[0].status == 409 and answers[0].body["outcome"] == "waiting"
    assert answers[0].body["waiting_for"] == first
    assert answers[-1].body["outcome"] == "completed"
    [started] = _starts(db, bodies, second)
    first_effect = _effect(db, bodies, first)
    assert first_effect is not None and started["at"] >= first_effect["at"]
    assert len(_starts(db, bodies, first)) == 1 and _effect(db, bodies, second) is not None
    assert _send(pool, job, SECOND).body["outcome"] == "duplicate"
