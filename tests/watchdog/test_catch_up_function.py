"""The watchdog function's catch-up, black box, on the real clock: functions/watchdog/main.py served
by functions-framework on the Firestore emulator, and again on a Valkey server (RUNONCE_STORE of
the watchdog and the team's job), Cloud Scheduler's API played by the Google API stand-in
(RUNONCE_SCHEDULER_BASE_URL), whose `jobs.run` has the forced delivery sent to a pool of real
functions-framework instances serving a decorated job that records every execution.

The team's hourly job missed two runs: one within its catch-up window (started once by the
first tick, not reported; a second tick does nothing) and one older (reported only).
"""

from __future__ import annotations

import json
import threading
import time
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import functions_framework
import pytest
from google.cloud import firestore

from emulator.googleapis import GoogleApisStandIn
from localscheduler.hosts.pool import InstancePool
from runonce.core.store import CAUSE_FIELD, Claim, StoredResult
from runonce.scheduler.expected import expected_times, next_time, scheduled_key
from runonce.store.connection import open_store
from tests.conftest import PROJECT, clear_of_the_next_tick
from tests.operate.test_backfill import SOURCE
from tests.watchdog.conftest import watchdog_lines

MAIN = "functions/watchdog/main.py"
LOCATION = "europe-west1"
SCHEDULER_JOB = "orders-close"
SCHEDULE = "0 * * * *"
GRACE = timedelta(seconds=60)
WINDOW = timedelta(minutes=90)
EDGE = timedelta(minutes=3)
"""How close to the next scheduled time a test's forced delivery may be sent (see the test)."""


def rfc3339(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def scheduler_headers(job: str, moment: datetime) -> dict[str, str]:
    return {
        "User-Agent": "Google-Cloud-Scheduler",
        "X-CloudScheduler": "true",
        "X-CloudScheduler-JobName": job,
        "X-CloudScheduler-ScheduleTime": rfc3339(moment),
        "X-Runonce-Project": PROJECT,
        "X-Runonce-Location": LOCATION,
    }


@pytest.fixture(params=["firestore", "valkey"])
def names(request) -> dict[str, str]:
    """The test's names, and its run store: the Firestore emulator's databases, or (RUNONCE_STORE
    of the team's job and the watchdog) the session's Valkey server, the team's records and the
    watchdog's under their collections' names."""
    suffix = uuid.uuid4().hex[:8]
    store = "firestore"
    if request.param == "valkey":
        store = f"valkey://127.0.0.1:{request.getfixturevalue('valkey_server').port}"
    return {
        "ledger": f"ledger-{suffix}",
        "own": f"watchdog-{suffix}",
        "collection": f"scheduler_runs_{suffix}",
        "executions": f"executions_{suffix}",
        "since": rfc3339(datetime.now(UTC) - timedelta(hours=6)),
        "store": store,
    }


@pytest.fixture
def pool(firestore_emulator, names, tmp_path) -> Iterator[InstancePool]:
    """The team's job: real functions-framework instances on the team's ledger."""
    env = {
        "FIRESTORE_EMULATOR_HOST": firestore_emulator.host,
        "GOOGLE_CLOUD_PROJECT": PROJECT,
        "RUNONCE_DATABASE": names["ledger"],
        "RUNONCE_COLLECTION": names["collection"],
        "RUNONCE_STORE": names["store"],
        "BACKFILL_EXECUTIONS": names["executions"],
    }
    started = InstancePool("catch-up", SOURCE, "handle", 1, env, tmp_path / "instances").start()
    yield started
    started.stop()


@pytest.fixture
def scheduler(pool) -> Iterator[GoogleApisStandIn]:
    """Cloud Scheduler's API: the job, and `jobs.run` sending the forced delivery."""
    stand_in = GoogleApisStandIn().start()
    name = f"projects/{PROJECT}/locations/{LOCATION}/jobs/{SCHEDULER_JOB}"
    stand_in._store({"name": name, "userUpdateTime": "2026-01-01T00:00:00Z"})

    def deliver() -> None:
        upcoming = next_time(SCHEDULE, "Etc/UTC", datetime.now(UTC))
        pool.post("", scheduler_headers(SCHEDULER_JOB, upcoming), deadline=60, wait=60)

    stand_in.on_start = lambda operation: threading.Thread(target=deliver, daemon=True).start()
    yield stand_in
    stand_in.stop()


@pytest.fixture
def watchdog(names, scheduler, monkeypatch):
    """The watchdog function, configured as the stack configures it, with a 90-minute catch-up."""
    jobs = [
        {
            "job": "close",
            "scheduler_job": SCHEDULER_JOB,
            "schedule": SCHEDULE,
            "time_zone": "Etc/UTC",
            "grace_seconds": int(GRACE.total_seconds()),
            "lookback_seconds": 86400,
            "since": names["since"],
            "catch_up_seconds": int(WINDOW.total_seconds()),
        }
    ]
    variables = {
        "RUNONCE_DATABASE": names["own"],
        "RUNONCE_COLLECTION": "watchdog_runs",
        "RUNONCE_WATCHDOG_TEAM": "orders",
        "RUNONCE_WATCHDOG_LOCATION": LOCATION,
        "RUNONCE_WATCHDOG_LEDGER_DATABASE": names["ledger"],
        "RUNONCE_WATCHDOG_LEDGER_COLLECTION": names["collection"],
        "RUNONCE_STORE": names["store"],
        "RUNONCE_WATCHDOG_JOBS": json.dumps(jobs),
        "RUNONCE_SCHEDULER_BASE_URL": scheduler.url,
    }
    for name, value in variables.items():
        monkeypatch.setenv(name, value)
    for name in ("FUNCTION_TARGET", "FUNCTION_SIGNATURE_TYPE", "FUNCTION_SOURCE"):
        monkeypatch.delenv(name, raising=False)
    return functions_framework.create_app("handle", MAIN, "http").test_client()


def test_the_watchdog_catches_up_a_missed_run_once_and_reports_an_older_one_only(
    names, watchdog, scheduler, capsys
):
    client = firestore.Client(project=PROJECT, database=names["ledger"])
    ledger = open_store(
        names["store"], names["collection"], timedelta(seconds=60), timedelta(days=7), names["ledger"]
    )
    clear_of_the_next_tick(SCHEDULE, "Etc/UTC", EDGE)
    now = datetime.now(UTC)
    since = datetime.fromisoformat(names["since"])
    # Every run until now has a record, but the oldest and the latest past its grace. (A future
    # run's record would make the forced delivery, which carries its time, count as that run.)
    ticks = expected_times(SCHEDULE, "Etc/UTC", since, now)
    older = ticks[0]  # five or six hours ago
    latest = max(moment for moment in ticks if moment <= now - GRACE - timedelta(seconds=5))
    assert now - older > WINDOW >= now - latest
    for moment in [moment for moment in ticks if moment not in (older, latest)]:
        claim = ledger.claim(scheduled_key(SCHEDULER_JOB, moment, PROJECT, LOCATION), {"job": SCHEDULER_JOB})
        assert isinstance(claim, Claim) and ledger.complete(claim, StoredResult.of(1)) is not None
    latest_key = scheduled_key(SCHEDULER_JOB, latest, PROJECT, LOCATION)

    def tick(moment: datetime) -> dict:
        answer = watchdog.post("/", headers=scheduler_headers("orders-watchdog", moment))
        assert answer.status_code == 200, answer.get_json()
        return answer.get_json()["result"]

    first = tick(now.replace(second=0, microsecond=0))
    assert first == {"jobs": 1, "missed": 2, "reported": 1, "caught_up": 1}
    lines = watchdog_lines(capsys.readouterr().out)
    assert [(line["schedule_time"], line.get("missed_run"), line.get("catch_up")) for line in lines] == [
        (rfc3339(older), "never_delivered", None),
        (rfc3339(latest), None, "started"),
    ]
    deadline = time.monotonic() + 60
    while (ledger.read(latest_key) or {}).get("status") != "completed" and time.monotonic() < deadline:
        time.sleep(0.5)
    record = ledger.read(latest_key)
    assert record is not None and (record["status"], record[CAUSE_FIELD]) == ("completed", "catch_up")

    second = tick(now.replace(second=0, microsecond=0) - timedelta(minutes=1))
    assert second == {"jobs": 1, "missed": 1, "reported": 0, "caught_up": 0}
    assert watchdog_lines(capsys.readouterr().out) == []
    executions = [doc.to_dict() for doc in client.collection(names["executions"]).stream()]
    assert [execution["run_key"] for execution in executions] == [latest_key]
    assert len(scheduler.starts()) == 1
