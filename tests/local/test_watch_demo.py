"""The demo's watchdog and `runonce runs`: the planned misses reported once is the only verdict
that passes; the hook runs the real watchdog on records in the Firestore emulator and ends with
the runs table of the job of the misses."""

from __future__ import annotations

import json
import re
import uuid
from datetime import UTC, datetime, timedelta

import pytest
from google.cloud import firestore

from localscheduler.demos.watch import FirestoreSettings, WatchVerdict, planned, watch_missed_runs
from localscheduler.scheduler.cloud_scheduler import Trigger, triggers
from localscheduler.scheduler.faults import FaultMix
from localscheduler.scheduler.misses import PlannedMisses
from localscheduler.scheduler.plan import planned_runs
from operate.cli import print_runs
from operate.runs import MISSING, Row
from runonce.contract import MissedRun
from runonce.scheduler.expected import scheduled_key
from stacks.naming import scheduler_job_name
from stacks.team import TEAMS_DIR, load_teams

START = datetime(2026, 3, 29, 0, 0, tzinfo=UTC)
SPAN = timedelta(hours=2)
[TEAM] = [team for team in load_teams(TEAMS_DIR) if team.name == "example"]
[JOB] = [job for job in TEAM.jobs if job.name == "report"]
LEASE = 126
NEVER = ("report", START + timedelta(minutes=40), MissedRun.NEVER_DELIVERED)
STUCK = ("report", START + timedelta(minutes=50), MissedRun.RETRIED_OUT)
OTHER = ("report", START + timedelta(minutes=60), MissedRun.NEVER_DELIVERED)
FIRST = {"jobs": 1, "missed": 2, "reported": 2}
SECOND = {"jobs": 1, "missed": 2, "reported": 0}


@pytest.mark.fast
def test_the_planned_misses_reported_by_the_first_tick_and_by_no_second_one_pass():
    verdict = WatchVerdict(frozenset({NEVER, STUCK}), frozenset({NEVER, STUCK}), FIRST, SECOND)
    assert verdict.ok
    assert verdict.line() == "watchdog: 2 missed runs reported, as planned; a second tick reported none"


@pytest.mark.fast
def test_a_run_reported_that_was_not_lost_on_purpose_fails():
    counts = {**FIRST, "missed": 3, "reported": 3}
    verdict = WatchVerdict(
        frozenset({NEVER, STUCK}), frozenset({NEVER, STUCK, OTHER}), counts, {**counts, "reported": 0}
    )
    assert not verdict.ok
    assert verdict.problems == [
        "reported a run not lost on purpose: report 2026-03-29 01:00Z never_delivered"
    ]


@pytest.mark.fast
def test_a_planned_miss_left_unreported_fails():
    counts = {**FIRST, "missed": 1, "reported": 1}
    verdict = WatchVerdict(frozenset({NEVER, STUCK}), frozenset({NEVER}), counts, {**counts, "reported": 0})
    assert verdict.problems == ["did not report report 2026-03-29 00:50Z retried_out"]
    assert verdict.line().startswith("FAIL watchdog: did not report")


@pytest.mark.fast
def test_a_planned_miss_reported_under_another_state_fails():
    still_held = (*STUCK[:2], MissedRun.STILL_HELD)
    verdict = WatchVerdict(frozenset({NEVER, STUCK}), frozenset({NEVER, still_held}), FIRST, SECOND)
    assert len(verdict.problems) == 2 and not verdict.ok


@pytest.mark.fast
def test_a_second_tick_that_reports_again_fails():
    verdict = WatchVerdict(frozenset({NEVER, STUCK}), frozenset({NEVER, STUCK}), FIRST, FIRST)
    assert verdict.problems == ["a second tick reported 2 again"]


@pytest.mark.fast
def test_the_runs_table_shows_a_missing_run_and_a_stuck_one(capsys):
    missing = Row("report", "k-missing", NEVER[1], False, MISSING, None, "no record", None, None, None)
    stuck = Row("report", "k-stuck", STUCK[1], False, "in_progress", 3, "lease ended", STUCK[1], None, None)
    print_runs("runs of team example", [missing, stuck])
    out = capsys.readouterr().out
    assert "runs of team example" in out
    # A run with no record has no key to show: the rows are found by their schedule times.
    lines = [line for line in out.splitlines() if "2026-03-29 00:" in line]
    assert len(lines) == 2 and "k-missing" not in out and "k-stuck" in lines[1]
    assert "2026-03-29 00:40:00" in lines[0] and MISSING in lines[0]
    assert "2026-03-29 00:50:00" in lines[1] and "in_progress" in lines[1]


def _plan() -> list[Trigger]:
    runs = planned_runs(TEAM, JOB, START, START + SPAN)
    return PlannedMisses(never_delivered=1, stuck_claims=1, seed=7).place(
        triggers(runs, FaultMix(), 60), START, START + SPAN
    )


def _ledger(plan: list[Trigger], collection: str, skip: datetime | None = None) -> None:
    """Records as the demo's instances leave them: every run completed, the stuck one in progress
    with its lease long over, the never-delivered one (and `skip`) absent."""
    runs = firestore.Client(project="runonce-local").collection(collection)
    job = scheduler_job_name(TEAM.name, JOB.name)
    for trigger in plan:
        moment = trigger.run.schedule_time
        if trigger.miss is MissedRun.NEVER_DELIVERED or moment == skip:
            continue
        record = {
            "job": job,
            "schedule_time": moment.strftime("%Y-%m-%dT%H:%M:%SZ"),
            "forced": False,
            "attempts": 1,
            "claimed_at": moment,
            "status": "completed",
            "finished_at": moment + timedelta(seconds=2),
        }
        if trigger.miss is MissedRun.RETRIED_OUT:
            record.update(status="in_progress", attempts=3, lease_expires=moment + timedelta(seconds=LEASE))
            del record["finished_at"]
        runs.document(scheduled_key(job, moment, TEAM.project, TEAM.region)).set(record)


def _settings(firestore_emulator) -> FirestoreSettings:
    suffix = uuid.uuid4().hex[:8]
    return FirestoreSettings(firestore_emulator.host, "runonce-local", f"runs-{suffix}", f"claims-{suffix}")


def test_the_hook_reports_the_planned_misses_once_and_ends_with_their_job_s_runs(firestore_emulator, capsys):
    plan = _plan()
    settings = _settings(firestore_emulator)
    _ledger(plan, settings.collection)
    expected = [t for t in plan if t.miss]
    assert watch_missed_runs(TEAM, {"report": LEASE}, (START, START + SPAN), settings, expected)
    out = capsys.readouterr().out
    errors = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
    assert sorted((e["severity"], e["missed_run"], e["schedule_time"]) for e in errors) == sorted(
        ("ERROR", t.miss.value, t.run.schedule_time.strftime("%Y-%m-%dT%H:%M:%SZ")) for t in expected
    )
    assert "watchdog: 2 missed runs reported, as planned; a second tick reported none" in out
    assert "$ runonce runs --team example --job report" in out
    # Each row of the table by its schedule time.
    table = {
        found.group(1): line
        for line in out.splitlines()
        if (found := re.search(r"^ *report +(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d)", line))
    }
    for trigger in expected:
        status = MISSING if trigger.miss is MissedRun.NEVER_DELIVERED else "in_progress"
        assert status in table.get(f"{trigger.run.schedule_time:%Y-%m-%d %H:%M:%S}", ""), out
    assert planned(expected) == {(t.run.job.name, t.run.schedule_time, t.miss) for t in expected}


def test_the_hook_fails_on_a_run_missed_that_was_not_planned(firestore_emulator, capsys):
    plan = _plan()
    expected = [t for t in plan if t.miss]
    unplanned = next(t.run.schedule_time for t in plan if not t.miss)
    settings = _settings(firestore_emulator)
    _ledger(plan, settings.collection, skip=unplanned)
    assert not watch_missed_runs(TEAM, {"report": LEASE}, (START, START + SPAN), settings, expected)
    out = capsys.readouterr().out
    reported = f"report {unplanned:%Y-%m-%d %H:%M}Z never_delivered"
    assert f"FAIL watchdog: reported a run not lost on purpose: {reported}" in out


def test_the_hook_fails_when_a_planned_miss_is_not_reported(firestore_emulator, capsys):
    plan = _plan()
    expected = [t for t in plan if t.miss]
    settings = _settings(firestore_emulator)
    _ledger(plan, settings.collection)
    never = next(t for t in expected if t.miss is MissedRun.NEVER_DELIVERED)
    job = scheduler_job_name(TEAM.name, JOB.name)
    key = scheduled_key(job, never.run.schedule_time, TEAM.project, TEAM.region)
    firestore.Client(project="runonce-local").collection(settings.collection).document(key).set(
        {"job": job, "status": "completed"}
    )
    assert not watch_missed_runs(TEAM, {"report": LEASE}, (START, START + SPAN), settings, expected)
    assert "FAIL watchdog: did not report report" in capsys.readouterr().out
