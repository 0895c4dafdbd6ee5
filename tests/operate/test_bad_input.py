"""Every verb of the `runonce` command, every option, given a value it cannot use: exit 2, a
message naming the option (or the team file's field) and the fix, no traceback, and nothing
written to the team's ledger (docs/operate.md, "Exit codes").

The command runs as an operator runs it (the `runonce` click group, the entry `python -m operate`
and `.venv/bin/runonce` call) against the Firestore and Pub/Sub emulators, on a team whose ledger
already holds runs, and beside team files whose schedule cannot be evaluated.
"""

from __future__ import annotations

import os
import subprocess
import sys
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from operate.cli import runonce
from operate.rerun import SCHEDULER_URL_VARIABLE
from runonce.core.store import StoredResult
from tests.conftest import PROJECT, SCHEDULED

ROOT = Path(__file__).resolve().parents[2]
FAILED_TIME = "2026-11-29T02:50:00Z"
"""A failed run of `report` in the ledger: a time every `rerun` case could name."""
BROKEN_TEAM = """
from stacks.team import Job, Team

team = Team(
    name="{name}",
    project="{project}",
    region="europe-west1",
    collection="{collection}",
    jobs=[Job(name="late", schedule="{schedule}", time_zone="{time_zone}", source="report")],
)
"""
BROKEN = {
    "badzone": ("0 3 * * *", "Mars/Olympus_Mons"),
    "badcron": ("61 * * * *", "Etc/UTC"),
    "scheduledonly": ("0 3 * * *", "Etc/UTC"),
}
"""Team files beside the test's team: a time zone no zoneinfo has, a minute past 59, and a team
with no event job (a sound file, for the verbs about dead letters)."""

# (verb and its arguments, what stderr must name). TEAM is the test's team, BY an operator.
CASES: list[tuple[list[str], list[str]]] = [
    # runs
    (["runs", "--team", "nosuchteam"], ["--team", "nosuchteam"]),
    (["runs", "--team", ""], ["--team"]),
    (["runs", "--team", "badzone"], ["--team", "late", "Mars/Olympus_Mons", "make synth"]),
    (["runs", "--team", "badcron"], ["--team", "late", "61 * * * *", "make synth"]),
    (["runs", "--team", "TEAM", "--job", "nope"], ["--job", "report, nightly"]),
    (["runs", "--team", "TEAM", "--job", ""], ["--job"]),
    (["runs", "--team", "TEAM", "--since", "10000000000d"], ["--since", "400d"]),
    (["runs", "--team", "TEAM", "--since", "99999999999999999999999999s"], ["--since", "400d"]),
    (["runs", "--team", "TEAM", "--since", "two days"], ["--since", "90m"]),
    (["runs", "--team", "TEAM", "--since", "-1d"], ["--since", "90m"]),
    (["runs", "--team", "TEAM", "--since", ""], ["--since", "90m"]),
    (["runs", "--team", "TEAM", "--since", "500d"], ["--since", "400d"]),
    (["runs", "--team", "TEAM", "--job", "report", "--since", "140d"], ["--since", "shorter"]),
    (["runs", "--team", "TEAM", "--status", "done"], ["--status", "completed"]),
    (["runs", "--team", "TEAM", "--jsn"], ["--jsn"]),
    # show
    (["show", "a/b", "--team", "TEAM"], ["KEY", "runonce runs"]),
    (["show", "x" * 1501, "--team", "TEAM"], ["KEY", "1500"]),
    (["show", "\udcff", "--team", "TEAM"], ["KEY", "UTF-8"]),
    (["show", "--team", "TEAM"], ["KEY", "--job and --time"]),
    (["show", "--team", "TEAM", "--job", "report"], ["KEY", "--job and --time"]),
    (["show", "somekey", "--team", "TEAM", "--job", "report", "--time", FAILED_TIME], ["KEY", "not both"]),
    (["show", "somekey", "--team", "nosuchteam"], ["--team", "nosuchteam"]),
    (["show", "--team", "TEAM", "--job", "nope", "--time", FAILED_TIME], ["--job", "report, nightly"]),
    (["show", "--team", "TEAM", "--job", "orders", "--time", FAILED_TIME], ["--time", "event job"]),
    (["show", "--team", "TEAM", "--job", "report", "--time", "03:00"], ["--time", "RFC 3339"]),
    (
        ["show", "--team", "TEAM", "--job", "report", "--time", "2026-02-30T00:00:00Z"],
        ["--time", "real date"],
    ),
    (
        ["show", "--team", "TEAM", "--job", "report", "--time", "0001-01-01T00:00:00+01:00"],
        ["--time", "1-9999"],
    ),
    (
        ["show", "--team", "TEAM", "--job", "report", "--time", "9999-12-31T23:59:59-01:00"],
        ["--time", "1-9999"],
    ),
    # release
    (["release", "a/b", "--team", "TEAM", "--by", "BY"], ["KEY", "runonce runs"]),
    (["release", "..", "--team", "TEAM", "--by", "BY"], ["KEY", "runonce runs"]),
    (["release", "nosuchkey", "--team", "TEAM", "--by", "BY"], ["KEY", "runonce runs"]),
    (["release", "nosuchkey", "--team", "nosuchteam", "--by", "BY"], ["--team", "nosuchteam"]),
    (["release", "HELD", "--team", "TEAM", "--by", ""], ["--by", "name"]),
    (["release", "HELD", "--team", "TEAM", "--by", "   "], ["--by", "name"]),
    (["release", "HELD", "--team", "TEAM", "--by", "x" * 2000], ["--by", "characters"]),
    (["release", "HELD", "--team", "TEAM", "--by", "BY", "--forse"], ["--forse"]),
    # rerun
    (["rerun", "--team", "nosuchteam", "--job", "report", "--time", FAILED_TIME], ["--team", "nosuchteam"]),
    (["rerun", "--team", "", "--job", "report", "--time", FAILED_TIME], ["--team"]),
    (
        ["rerun", "--team", "badzone", "--job", "late", "--time", "2026-11-28T03:00:00Z"],
        ["--team", "late", "time_zone", "Mars/Olympus_Mons", "make synth"],
    ),
    (
        ["rerun", "--team", "badcron", "--job", "late", "--time", "2026-11-29T02:00:00Z"],
        ["--team", "late", "schedule", "61 * * * *", "make synth"],
    ),
    (["rerun", "--team", "TEAM", "--job", "nope", "--time", FAILED_TIME], ["--job", "report, nightly"]),
    (["rerun", "--team", "TEAM", "--job", "", "--time", FAILED_TIME], ["--job"]),
    (["rerun", "--team", "TEAM", "--job", "orders", "--time", FAILED_TIME], ["--job", "event job"]),
    (["rerun", "--team", "TEAM", "--job", "report", "--time", "03:00"], ["--time", "RFC 3339"]),
    (["rerun", "--team", "TEAM", "--job", "report", "--time", "2026-11-29T02:50:00"], ["--time", "RFC 3339"]),
    (
        ["rerun", "--team", "TEAM", "--job", "report", "--time", "2026-11-29T02:55:00Z"],
        ["--time", "past run"],
    ),
    (
        ["rerun", "--team", "TEAM", "--job", "report", "--time", "2027-11-29T02:50:00Z"],
        ["--time", "past run"],
    ),
    (
        ["rerun", "--team", "TEAM", "--job", "report", "--time", "0001-01-01T00:00:00Z"],
        ["--time", "past run"],
    ),
    (
        ["rerun", "--team", "TEAM", "--job", "report", "--time", "9999-12-31T23:50:00Z"],
        ["--time", "past run"],
    ),
    (
        ["rerun", "--team", "TEAM", "--job", "report", "--time", "0001-01-01T00:00:00+01:00"],
        ["--time", "1-9999"],
    ),
    (["rerun", "--team", "TEAM", "--job", "report", "--time", FAILED_TIME, "--by", ""], ["--by", "name"]),
    (["rerun", "--team", "TEAM", "--job", "report", "--time", FAILED_TIME, "--by", "x" * 2000], ["--by"]),
    (["rerun", "--team", "TEAM", "--job", "report", "--time", FAILED_TIME, "--wait", "601"], ["--wait"]),
    (["rerun", "--team", "TEAM", "--job", "report", "--time", FAILED_TIME, "--wait", "-1"], ["--wait"]),
    (["rerun", "--team", "TEAM", "--job", "report", "--time", FAILED_TIME, "--wait", "soon"], ["--wait"]),
    (["rerun", "--team", "TEAM", "--job", "report"], ["--time"]),
    # dead-letters
    (["dead-letters", "--team", "nosuchteam"], ["--team", "nosuchteam"]),
    (["dead-letters", "--team", "scheduledonly"], ["--team", "no event jobs"]),
    (["dead-letters", "--team", "TEAM", "--job", "report"], ["--job", "scheduled job"]),
    (["dead-letters", "--team", "TEAM", "--job", "nope"], ["--job", "report, nightly"]),
    # replay
    (["replay", "12345", "--team", "TEAM", "--by", "BY"], ["COPY_ID", "runonce dead-letters"]),
    (["replay", "", "--team", "TEAM", "--by", "BY"], ["COPY_ID"]),
    (["replay", "12345", "--team", "nosuchteam", "--by", "BY"], ["--team", "nosuchteam"]),
    (["replay", "12345", "--team", "scheduledonly", "--by", "BY"], ["--team", "no event jobs"]),
    (["replay", "12345", "--team", "TEAM", "--job", "report", "--by", "BY"], ["--job", "scheduled job"]),
    (["replay", "12345", "--team", "TEAM", "--by", ""], ["--by", "name"]),
    # the group itself
    (["nosuchverb"], ["nosuchverb"]),
]


@pytest.fixture
def seeded(ops, topics, clock, monkeypatch) -> dict[str, Any]:
    """The test's team with a failed run, a run held under a live lease, a finished event and its
    dead-letter copy; broken team files beside it, on the same ledger; Scheduler unreachable."""
    for name, (schedule, zone) in BROKEN.items():
        (Path(ops.folder) / f"{name}.py").write_text(
            BROKEN_TEAM.format(
                name=name, project=PROJECT, collection=ops.team.collection, schedule=schedule, time_zone=zone
            )
        )
    monkeypatch.setenv(SCHEDULER_URL_VARIABLE, "http://127.0.0.1:9")  # a call would fail, not hang
    clock.current = SCHEDULED - timedelta(minutes=10)
    failed = ops.claim_scheduled(SCHEDULED - timedelta(minutes=10))
    assert ops.store.fail(failed, "bad input")
    clock.current = SCHEDULED + timedelta(seconds=5)
    held = ops.claim_scheduled(SCHEDULED)
    assert ops.store.hold(held, 3600, "outcome unknown")
    done = ops.store.claim("event-done", {"event_source": ops.team.event_jobs[0].push_subscription})
    assert ops.store.complete(done, StoredResult.of(1)) is not None  # type: ignore[arg-type]
    topics.dead_letter(b"order", {"runonce_reason": "permanent_failure", "runonce_run_key": "event-done"})
    paid = ops.team.job("paid")
    topics.publisher.create_topic(request={"name": paid.dead_letter_topic})
    topics.subscriber.create_subscription(
        request={"name": paid.dead_letter_subscription, "topic": paid.dead_letter_topic}
    )
    return {"TEAM": ops.team.name, "BY": "tester", "HELD": held.key}


def ledger(ops) -> dict[str, dict[str, Any]]:
    """Every record of the team's collection, by id."""
    client = ops.store.ledger._client
    return {doc.id: doc.to_dict() for doc in client.collection(ops.team.collection).stream()}


@pytest.mark.parametrize(
    ("args", "named"), CASES, ids=[" ".join(args)[:60].replace("\udcff", "?") for args, _ in CASES]
)
def test_a_bad_value_exits_2_naming_it_with_no_traceback_and_nothing_written(ops, seeded, args, named):
    before = ledger(ops)
    argv = [seeded.get(arg, arg) for arg in args]
    result = CliRunner().invoke(runonce, argv)
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exc_info
    assert result.exit_code == 2, (result.stdout, result.stderr)
    assert "Traceback" not in result.stderr
    for word in named:
        assert word in result.stderr, result.stderr
    assert ledger(ops) == before


@pytest.mark.parametrize(
    ("args", "named"),
    [
        (["runs", "--team", "TEAM", "--since", "10000000000d"], "--since"),
        (
            ["rerun", "--team", "badzone", "--job", "late", "--time", "2026-11-28T03:00:00Z", "--by", "BY"],
            "--team",
        ),
    ],
    ids=["since-overflow", "rerun-bad-time-zone"],
)
def test_the_installed_command_exits_2_without_a_traceback(ops, seeded, args, named):
    before = ledger(ops)
    run = subprocess.run(
        [sys.executable, "-m", "operate", *[seeded.get(arg, arg) for arg in args]],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": f"{ROOT}:{ROOT / 'functions'}"},
        timeout=120,
    )
    assert run.returncode == 2, run.stderr
    assert "Traceback" not in run.stderr
    assert named in run.stderr
    assert ledger(ops) == before
