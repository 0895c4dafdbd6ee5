"""`runonce runs`, `runonce show` and the bad-input refusals, on real records in the emulator."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

import runonce as library
from runonce.core.store import waiting_note
from tests.conftest import SCHEDULED
from tests.operate.conftest import ON_BOTH_STORES

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(params=ON_BOTH_STORES)
def ledger_kind(request) -> str:
    """Every test here runs on a team on Firestore and on a team on Valkey."""
    return request.param


def _rows(result) -> list[dict]:
    assert result.exit_code == 0, result.stderr
    return [json.loads(line) for line in result.stdout.splitlines()]


def test_runs_lists_each_expected_run_with_its_record_or_a_row_saying_it_has_none_and_forced_runs(
    ops, served, clock
):
    ops.store.fail(ops.claim_scheduled(SCHEDULED - timedelta(minutes=10)), "upstream said 400")
    clock.current = SCHEDULED - timedelta(minutes=4, seconds=30)
    forced = served.force("report")  # Scheduler sends the next scheduled time, 03:00
    clock.current = SCHEDULED + timedelta(seconds=5)
    scheduled = served.deliver("report", SCHEDULED)
    assert (forced["outcome"], scheduled["outcome"]) == ("completed", "completed")
    assert forced["run_key"] != scheduled["run_key"] == ops.scheduled_key(SCHEDULED)
    rows = _rows(ops.run("runs", "--team", ops.team.name, "--job", "report", "--since", "30m", "--json"))
    assert [(row["time"][11:19], row["forced"], row["status"]) for row in rows] == [
        ("02:40:00", False, "missing"),
        ("02:50:00", False, "failed"),
        ("02:55:30", True, "completed"),
        ("03:00:00", False, "completed"),
    ]
    by_key = {row["key"]: row for row in rows}
    assert by_key[forced["run_key"]]["schedule_time"] == "2026-11-29T03:00:00+00:00"
    assert rows[1]["outcome"] == "upstream said 400"
    assert rows[0]["key"] == ops.scheduled_key(SCHEDULED - timedelta(minutes=20))
    assert by_key[scheduled["run_key"]]["attempts"] == 1


def test_a_forced_run_of_a_daily_job_a_minute_ago_is_listed_though_it_carries_tomorrows_time(
    ops, served, clock
):
    forced = served.force("nightly")
    assert forced["outcome"] == "completed"
    clock.advance(60)
    rows = _rows(ops.run("runs", "--team", ops.team.name, "--job", "nightly", "--since", "1h", "--json"))
    [row] = rows
    assert (row["key"], row["forced"], row["time"]) == (
        forced["run_key"],
        True,
        (SCHEDULED + timedelta(seconds=5)).isoformat(),
    )
    assert row["schedule_time"] == "2026-11-30T01:30:00+00:00"  # 02:30 in Berlin, tomorrow


def test_forced_runs_are_in_the_window_of_when_they_were_claimed(ops, served, clock):
    first = served.force("nightly")
    clock.advance(3 * 3600)
    served.behaviour = lambda: (_ for _ in ()).throw(library.PermanentError("no"))
    clock.current = SCHEDULED + timedelta(days=1, hours=2)  # past tomorrow's run: a new interval
    second = served.force("nightly")
    assert (first["outcome"], second["outcome"]) == ("completed", "failed")
    recent = _rows(ops.run("runs", "--team", ops.team.name, "--job", "nightly", "--since", "2h", "--json"))
    assert [(row["key"], row["status"]) for row in recent if row["forced"]] == [(second["run_key"], "failed")]
    day = _rows(ops.run("runs", "--team", ops.team.name, "--job", "nightly", "--since", "2d", "--json"))
    assert [row["key"] for row in day if row["forced"]] == [first["run_key"], second["run_key"]]


def test_a_forced_run_with_no_schedule_time_is_refused_with_400_and_leaves_nothing_to_list(ops, served):
    answer = served.deliver("report", None)
    assert answer["status_code"] == 400 and "ScheduleTime" in str(answer)
    assert ops.store.find({}) == {}
    rows = _rows(ops.run("runs", "--team", ops.team.name, "--job", "report", "--since", "1h", "--json"))
    assert {row["status"] for row in rows} == {"missing"}


def test_runs_filters_by_status_and_prints_a_table(ops):
    ops.store.fail(ops.claim_scheduled(SCHEDULED), "bad input")
    rows = _rows(ops.run("runs", "--team", ops.team.name, "--since", "1h", "--status", "failed", "--json"))
    assert [row["status"] for row in rows] == ["failed"]
    table = ops.run("runs", "--team", ops.team.name, "--since", "1h")
    assert table.exit_code == 0
    assert "missing" in table.stdout and "bad input" in table.stdout


@pytest.mark.parametrize("columns", ["80", "60", "40", None])
def test_in_any_terminal_width_a_runs_error_is_folded_never_cut(ops, monkeypatch, columns):
    if columns is None:
        monkeypatch.delenv("COLUMNS", raising=False)
    else:
        monkeypatch.setenv("COLUMNS", columns)
    ops.store.fail(ops.claim_scheduled(SCHEDULED), "upstream said 400: quota exceeded for orders-eu")
    table = ops.run("runs", "--team", ops.team.name, "--since", "1h").stdout
    words = " ".join(" ".join(line.split()) for line in table.splitlines())
    assert "outcome or error" in table, table
    for word in ("upstream", "said", "400:", "quota", "exceeded", "for", "orders-eu"):
        assert f" {word} " in f" {words} ", table


@pytest.mark.parametrize("columns", ["80", "60", None])
def test_in_any_terminal_width_the_table_shows_each_runs_time_status_and_key_whole(ops, monkeypatch, columns):
    if columns is None:
        monkeypatch.delenv("COLUMNS", raising=False)
    else:
        monkeypatch.setenv("COLUMNS", columns)
    held = ops.claim_scheduled(SCHEDULED)
    rows = _rows(ops.run("runs", "--team", ops.team.name, "--since", "1h", "--json"))
    table = ops.run("runs", "--team", ops.team.name, "--since", "1h").stdout
    assert {"in_progress", "missing"} <= {row["status"] for row in rows}
    for row in rows:
        assert row["status"] in table
        assert row["time"].replace("T", " ").removesuffix("Z").split("+")[0][:19] in table, row["time"]
    assert ops.run("runs", "--team", ops.team.name, "--since", "1h").stdout.count(held.key[:8]) == 1


def test_a_run_that_waited_out_its_retries_is_listed_waited_out_and_filtered_by_that_status(ops):
    waited = ops.scheduled_key(SCHEDULED)  # a wait job's run answered 409: a note, no record
    ops.store.note(waiting_note(waited), {"waiting_run": waited, "waiting_for": "k-before"})
    rows = _rows(ops.run("runs", "--team", ops.team.name, "--since", "1h", "--json"))
    (row,) = [row for row in rows if row["key"] == waited]
    assert (row["status"], row["outcome"]) == (
        "waited_out",
        "no record: answered 409 waiting for run k-before until its retries ran out",
    )
    only = _rows(
        ops.run("runs", "--team", ops.team.name, "--since", "1h", "--status", "waited_out", "--json")
    )
    assert [row["key"] for row in only] == [waited]
    assert "waited_out" in ops.run("runs", "--team", ops.team.name, "--since", "1h").stdout


def test_runs_of_an_event_job_are_found_by_its_push_subscription_and_claim_time(ops, clock):
    job = ops.team.event_jobs[0]
    fields = {"event_kind": "pubsub", "event_source": job.push_subscription, "event_id": "m-1"}
    ops.store.claim("event-1", fields)
    ops.store.claim("event-other", {**fields, "event_source": "projects/p/subscriptions/someone-else"})
    clock.advance(3 * 3600)
    ops.store.claim("event-late", {**fields, "event_id": "m-2"})
    rows = _rows(ops.run("runs", "--team", ops.team.name, "--job", "orders", "--since", "2h", "--json"))
    assert [(row["key"], row["event_id"]) for row in rows] == [("event-late", "m-2")]
    rows = _rows(ops.run("runs", "--team", ops.team.name, "--job", "orders", "--since", "4h", "--json"))
    assert [row["key"] for row in rows] == ["event-1", "event-late"]


def test_an_unknown_team_exits_2_naming_the_known_ones_and_changes_nothing(ops):
    result = ops.run("release", "some-key", "--team", "nosuchteam", "--by", "tester")
    assert result.exit_code == 2
    assert "--team" in result.stderr and ops.team.name in result.stderr
    assert ops.store.find({}) == {}


def test_an_unknown_job_a_bad_duration_and_a_bad_time_exit_2(ops):
    job = ops.run("runs", "--team", ops.team.name, "--job", "nope")
    assert job.exit_code == 2 and "report, nightly, orders, paid" in job.stderr
    since = ops.run("runs", "--team", ops.team.name, "--since", "two days")
    assert since.exit_code == 2 and "--since" in since.stderr
    time = ops.run("show", "--team", ops.team.name, "--job", "report", "--time", "03:00")
    assert time.exit_code == 2 and "--time" in time.stderr and "RFC 3339" in time.stderr


def test_show_by_job_and_time_gives_the_record_and_the_next_step(ops, clock):
    claim = ops.claim_scheduled(SCHEDULED)
    clock.advance(200)
    # The same instant as SCHEDULED, written with another offset.
    at = "2026-11-29T04:00:00+01:00"
    result = ops.run("show", "--team", ops.team.name, "--job", "report", "--time", at)
    assert result.exit_code == 0, result.stderr
    shown = json.loads(result.stdout)
    assert (shown["key"], shown["job"]) == (claim.key, "report")
    assert shown["record"]["attempt_id"] == claim.attempt_id
    assert shown["next"][0]["command"] == f"runonce release {claim.key} --team {ops.team.name}"


def test_show_of_a_run_with_no_record_says_it_was_never_delivered_and_gives_the_backfill_of_that_run(ops):
    result = ops.run("show", "--team", ops.team.name, "--job", "report", "--time", "2026-11-29T02:00:00Z")
    assert result.exit_code == 0
    shown = json.loads(result.stdout)
    assert (shown["record"], shown["status"], shown["waited_out"]) == (None, "missing", None)
    [step] = shown["next"]
    assert "never delivered" in step["why"]
    window = "--from 2026-11-29T02:00:00Z --to 2026-11-29T02:00:00Z"
    assert step["command"] == f"runonce backfill --team {ops.team.name} --job report {window}"


def test_show_of_a_failed_scheduled_run_gives_its_rerun_command(ops):
    claim = ops.claim_scheduled(SCHEDULED)
    ops.store.fail(claim, "bad input")
    shown = json.loads(ops.run("show", claim.key, "--team", ops.team.name).stdout)
    assert shown["next"] == [
        {
            "command": f"runonce rerun --team {ops.team.name} --job report --time 2026-11-29T03:00:00Z",
            "why": "run it again once the cause is fixed (its history is kept)",
        }
    ]


def test_runs_of_an_eventarc_job_are_found_by_the_function_that_consumed_them(ops):
    job = ops.team.job("paid")
    fields = {"event_kind": "cloudevent", "event_source": "//storage", "event_id": "e-1"}
    ops.store.claim("paid-1", {**fields, "event_consumer": job.function})
    ops.store.claim("paid-other", {**fields, "event_consumer": "someone-else"})
    rows = _rows(ops.run("runs", "--team", ops.team.name, "--job", "paid", "--json"))
    assert [(row["key"], row["job"]) for row in rows] == [("paid-1", "paid")]


@pytest.mark.parametrize("key", ["a/b", "x" * 1501, "..", "__name__", " "])
@pytest.mark.parametrize("verb", ["show", "release"])
def test_a_key_that_cannot_be_a_record_id_exits_2_naming_key(ops, verb, key):
    by = ["--by", "tester"] if verb == "release" else []
    result = ops.run(verb, key, "--team", ops.team.name, *by)
    assert result.exit_code == 2, result.output
    assert "KEY" in result.stderr and "runonce runs" in result.stderr


def test_a_window_longer_than_any_retention_exits_2(ops):
    result = ops.run("runs", "--team", ops.team.name, "--since", "500d")
    assert result.exit_code == 2 and "--since" in result.stderr and "400d" in result.stderr


def test_a_team_whose_schedule_cannot_be_evaluated_exits_2_naming_the_job(ops):
    broken = Path(ops.folder) / "broken.py"
    broken.write_text(
        "from stacks.team import Job, Team\n"
        'team = Team(name="broken", project="p", region="europe-west1",\n'
        '            jobs=[Job(name="late", schedule="61 * * * *", source="report")])\n'
    )
    result = ops.run("runs", "--team", "broken")
    assert result.exit_code == 2
    assert "late" in result.stderr and "61 * * * *" in result.stderr and "make synth" in result.stderr


def test_python_m_operate_is_the_runonce_command(ops):
    run = subprocess.run(
        [sys.executable, "-m", "operate", "runs", "--team", "nosuchteam"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": f"{ROOT}:{ROOT / 'functions'}"},
        timeout=120,
    )
    assert run.returncode == 2
    assert run.stderr.startswith("Usage: runonce runs") and ops.team.name in run.stderr


def test_runs_expects_a_daily_job_in_its_time_zone_and_once_as_the_spring_forward_gap_ends(ops, clock):
    # Europe/Berlin skips 02:00-03:00 on 2027-03-28: cronsim's "30 2 * * *" fires at 03:00 local.
    clock.current = datetime(2027, 3, 29, 12, 0, tzinfo=UTC)
    rows = _rows(ops.run("runs", "--team", ops.team.name, "--job", "nightly", "--since", "3d", "--json"))
    assert [(row["time"], row["status"]) for row in rows] == [
        ("2027-03-27T01:30:00+00:00", "missing"),
        ("2027-03-28T01:00:00+00:00", "missing"),
        ("2027-03-29T00:30:00+00:00", "missing"),
    ]


def test_show_of_a_time_that_is_no_run_of_the_job_suggests_no_command(ops):
    result = ops.run("show", "--team", ops.team.name, "--job", "report", "--time", "2026-11-29T02:45:00Z")
    assert result.exit_code == 0, result.stderr
    [step] = json.loads(result.stdout)["next"]
    assert step["command"] is None and "is not a run of job report" in step["why"]


def test_the_missed_run_alerts_backfill_of_one_run_is_a_window_holding_exactly_that_run():
    # The alert's runbook says, for a waited_out run: backfill --from SCHEDULE_TIME --to SCHEDULE_TIME.
    from operate.cli import _window

    start, end = _window(None, "2026-11-29T03:00:00Z", "2026-11-29T03:00:00Z")
    moment = datetime(2026, 11, 29, 3, 0, tzinfo=UTC)
    assert start < moment <= end and end - start == timedelta(microseconds=1)
