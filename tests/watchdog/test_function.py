"""The watchdog function (functions/watchdog/main.py) served by functions-framework on the
Firestore emulator, configured as the stack configures it: a team ledger in one database, the
watchdog's own ledger in another; each tick is a Scheduler delivery."""

from __future__ import annotations

import json
import uuid
from datetime import UTC, datetime, timedelta

import functions_framework
import pytest
from google.cloud import firestore

from emulator.googleapis import GoogleApisStandIn
from operate.rerun import Target, request_rerun
from runonce.contract import MissedRun
from runonce.core.store import Claim, StoredResult
from runonce.scheduler.expected import forced_key, next_time, scheduled_key
from runonce.scheduler.watchdog import PAUSED_FIELD
from runonce.store.firestore import Ledger, LedgerStore
from tests.conftest import PROJECT
from tests.watchdog.conftest import watchdog_lines

MAIN = "functions/watchdog/main.py"
LOCATION = "europe-west1"
TICK = datetime(2026, 11, 29, 2, 0, tzinfo=UTC)
DEPLOYED = datetime(2026, 11, 29, 0, 55, tzinfo=UTC)


def rfc3339(time: datetime) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ")


@pytest.fixture
def databases():
    """The team's ledger database and the watchdog's own, named apart for this test."""
    suffix = uuid.uuid4().hex[:8]
    return f"ledger-{suffix}", f"watchdog-{suffix}"


@pytest.fixture
def environment(firestore_emulator, databases, monkeypatch):
    """The variables the stack sets on the watchdog, for one hourly job deployed at 00:55."""
    ledger_db, own_db = databases
    jobs = [
        {
            "job": "close",
            "scheduler_job": "orders-close",
            "schedule": "0 * * * *",
            "time_zone": "Etc/UTC",
            "grace_seconds": 1200,
            "lookback_seconds": 86400,
            "since": rfc3339(DEPLOYED),
        }
    ]
    variables = {
        "RUNONCE_DATABASE": own_db,
        "RUNONCE_COLLECTION": "watchdog_runs",
        "RUNONCE_LEASE_SECONDS": "180",
        "RUNONCE_RETENTION_SECONDS": str(2 * 86400),
        "RUNONCE_WATCHDOG_TEAM": "orders",
        "RUNONCE_WATCHDOG_LOCATION": LOCATION,
        "RUNONCE_WATCHDOG_LEDGER_DATABASE": ledger_db,
        "RUNONCE_WATCHDOG_LEDGER_COLLECTION": "scheduler_runs",
        "RUNONCE_WATCHDOG_JOBS": json.dumps(jobs),
    }
    for name, value in variables.items():
        monkeypatch.setenv(name, value)
    # create_app writes these into os.environ; keep them to this test.
    for name in ("FUNCTION_TARGET", "FUNCTION_SIGNATURE_TYPE", "FUNCTION_SOURCE"):
        monkeypatch.delenv(name, raising=False)
    return variables


@pytest.fixture
def team_ledger(environment, databases, clock) -> LedgerStore:
    client = firestore.Client(project=PROJECT, database=databases[0])
    return LedgerStore(Ledger(client, "scheduler_runs", timedelta(seconds=360), timedelta(days=7)))


def serve():
    return functions_framework.create_app("handle", MAIN, "http").test_client()


def tick(app, clock, at: datetime):
    clock.current = at + timedelta(seconds=2)
    headers = {
        "User-Agent": "Google-Cloud-Scheduler",
        "X-CloudScheduler": "true",
        "X-CloudScheduler-JobName": "orders-watchdog",
        "X-CloudScheduler-ScheduleTime": rfc3339(at),
        "X-Runonce-Project": PROJECT,
        "X-Runonce-Location": LOCATION,
    }
    return app.post("/", headers=headers)


def test_a_tick_reports_the_runs_that_did_not_finish_once_and_reads_the_team_ledger_only(
    team_ledger, clock, capsys, databases
):
    done = scheduled_key("orders-close", TICK - timedelta(hours=1), PROJECT, LOCATION)
    clock.current = TICK - timedelta(minutes=59)
    claim = team_ledger.claim(done, {"job": "orders-close"})
    assert isinstance(claim, Claim)
    assert team_ledger.complete(claim, StoredResult.of(1)) is not None
    app = serve()
    answer = tick(app, clock, TICK)
    assert answer.status_code == 200, answer.get_json()
    assert answer.get_json()["result"] == {"jobs": 1, "missed": 0, "reported": 0}
    # 01:00 completed; 02:00 is within its grace. An hour later 02:00 is past it, with no record.
    assert watchdog_lines(capsys.readouterr().out) == []
    later = tick(app, clock, TICK + timedelta(hours=1))
    assert later.get_json()["result"] == {"jobs": 1, "missed": 1, "reported": 1}
    [line] = watchdog_lines(capsys.readouterr().out)
    assert line["missed_run"] == MissedRun.NEVER_DELIVERED.value
    assert line["schedule_time"] == "2026-11-29T02:00:00Z"
    assert line["command"] == "runonce show --team orders --job close --time 2026-11-29T02:00:00Z"
    again = tick(app, clock, TICK + timedelta(hours=1, minutes=10))
    assert again.get_json()["result"] == {"jobs": 1, "missed": 1, "reported": 0}
    assert watchdog_lines(capsys.readouterr().out) == []
    # Its claims and ticks live in its own database; the team's ledger holds the one run written.
    team = firestore.Client(project=PROJECT, database=databases[0])
    assert [doc.id for doc in team.collection("scheduler_runs").stream()] == [done]
    own = firestore.Client(project=PROJECT, database=databases[1])
    assert f"missed:{line['run_key']}" in {doc.id for doc in own.collection("watchdog_runs").stream()}


def test_a_redelivered_tick_is_answered_as_a_duplicate(team_ledger, clock, capsys):
    app = serve()
    first = tick(app, clock, TICK)
    second = tick(app, clock, TICK)
    assert first.status_code == second.status_code == 200
    assert second.get_json()["outcome"] == "duplicate"
    lines = watchdog_lines(capsys.readouterr().out)
    assert [line["schedule_time"] for line in lines] == ["2026-11-29T01:00:00Z"]


def test_a_wrong_setting_fails_the_tick_naming_the_variable(team_ledger, clock, monkeypatch):
    monkeypatch.setenv("RUNONCE_WATCHDOG_JOBS", '[{"job": "close"}]')
    answer = tick(serve(), clock, TICK)
    body = answer.get_json()
    assert body["outcome"] == "failed", body
    assert "RUNONCE_WATCHDOG_JOBS[0] lacks scheduler_job" in body["error"]


def test_one_name_for_the_ledger_and_its_own_store_on_valkey_fails_the_tick_naming_both(
    environment, clock, monkeypatch, valkey_server
):
    monkeypatch.setenv("RUNONCE_STORE", f"valkey://127.0.0.1:{valkey_server.port}")
    monkeypatch.setenv("RUNONCE_COLLECTION", environment["RUNONCE_WATCHDOG_LEDGER_COLLECTION"])
    body = tick(serve(), clock, TICK).get_json()
    assert body["outcome"] == "failed", body
    assert (
        "the team's ledger (RUNONCE_WATCHDOG_LEDGER_COLLECTION) and the watchdog's own store "
        "(RUNONCE_COLLECTION) are both 'scheduler_runs' on the Valkey server RUNONCE_STORE names"
    ) in body["error"]


def test_a_re_run_that_dies_is_reported_once_more_by_the_function(team_ledger, clock, capsys):
    run = TICK - timedelta(hours=1)
    key = scheduled_key("orders-close", run, PROJECT, LOCATION)
    clock.current = run + timedelta(seconds=3)
    assert isinstance(team_ledger.claim(key, {"job": "orders-close"}), Claim)  # its attempt dies
    app = serve()

    def reported(at: datetime) -> list[str]:
        assert tick(app, clock, at).status_code == 200
        return [
            line["missed_run"] for line in watchdog_lines(capsys.readouterr().out) if line["run_key"] == key
        ]

    assert reported(TICK) == [MissedRun.RETRIED_OUT.value]
    clock.current = TICK + timedelta(minutes=5)
    target = Target("orders", "close", "orders-close", PROJECT, LOCATION, "0 * * * *", "Etc/UTC")

    def forced_delivery(target: Target) -> None:
        upcoming = next_time(target.schedule, target.time_zone, clock.current)
        forced = forced_key(target.scheduler_job, upcoming, PROJECT, LOCATION)
        assert (
            team_ledger.take_rerun(target.slot, forced, {"job": "orders-close", "forced": True}) is not None
        )

    request_rerun(team_ledger, target, run, "oncall@example.com", False, forced_delivery)  # then dies
    assert reported(TICK + timedelta(minutes=10)) == []  # its attempt holds the run
    assert reported(TICK + timedelta(minutes=30)) == [MissedRun.RETRIED_OUT.value]
    assert reported(TICK + timedelta(minutes=40)) == []


PAUSING_JOB = f"projects/{PROJECT}/locations/{LOCATION}/jobs/orders-close"


@pytest.fixture
def scheduler_api(environment, clock, monkeypatch):
    """The stand-in holding the team's Scheduler job (enabled), its pause stamped on the test's
    clock; the watchdog's job pauses after 2 failed runs."""
    api = GoogleApisStandIn().start()
    api.clock = lambda: rfc3339(clock())
    api._store(
        {
            "name": PAUSING_JOB,
            "schedule": "0 * * * *",
            "state": "ENABLED",
            "userUpdateTime": "2026-11-01T00:00:00Z",
        }
    )
    [job] = json.loads(environment["RUNONCE_WATCHDOG_JOBS"])
    monkeypatch.setenv("RUNONCE_WATCHDOG_JOBS", json.dumps([{**job, "pause_after_failures": 2}]))
    monkeypatch.setenv("RUNONCE_SCHEDULER_BASE_URL", api.url)
    yield api
    api.stop()


def failed_at(ledger, clock, time: datetime) -> None:
    clock.current = time
    claim = ledger.claim(scheduled_key("orders-close", time, PROJECT, LOCATION), {"job": "orders-close"})
    assert ledger.fail(claim, "PermanentError: the table was dropped")


def test_the_function_pauses_the_job_once_and_reports_no_tick_of_it_while_it_is_paused(
    team_ledger, scheduler_api, clock, capsys
):
    failed_at(team_ledger, clock, TICK - timedelta(hours=1))  # 01:00
    failed_at(team_ledger, clock, TICK)  # 02:00
    app = serve()
    assert tick(app, clock, TICK + timedelta(minutes=30)).status_code == 200
    pauses = [call for call in scheduler_api.calls if call.path.endswith(":pause")]
    assert [(call.method, call.path) for call in pauses] == [("POST", f"/v1/{PAUSING_JOB}:pause")]
    [line] = [line for line in watchdog_lines(capsys.readouterr().out) if PAUSED_FIELD in line]
    assert line[PAUSED_FIELD] == "2" and line["job"] == "close"
    assert scheduler_api.resources("jobs")[0]["state"] == "PAUSED"
    assert tick(app, clock, TICK + timedelta(hours=2, minutes=30)).status_code == 200  # 03:00, 04:00 not run
    assert watchdog_lines(capsys.readouterr().out) == []
    assert len([call for call in scheduler_api.calls if call.path.endswith(":pause")]) == 1
