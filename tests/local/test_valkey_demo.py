"""make demo's Valkey section (localscheduler.demos.valkey) at a small size: the team files' team on
Valkey (teams/ledger.py) with its scheduled job on functions-framework instances whose
RUNONCE_STORE names the Valkey server the section starts, played with the demo's fault mix on the
accelerated clock and judged as every demo job is. Its row is ok, each of its completed runs took
effect exactly once and is recorded on the server, and a second effect of a run (written to the
outbox under another document id) turns the row, and so the demo's exit code, to FAIL."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest
from google.cloud import firestore

from localscheduler.demo import DEFAULT_FAULTS
from localscheduler.demos.valkey import EXAMPLE_EVENT_JOB, EXAMPLE_TEAM, ValkeySection, report
from localscheduler.scheduler.faults import FaultMix
from localscheduler.store import ValkeyLedger
from stacks.config.store import Valkey
from stacks.team import TEAMS_DIR, load_teams
from tests.conftest import PROJECT

SEED = 7
OUTBOX = "report_outbox"  # functions/report/local_demo.toml


def on_valkey():
    return [team for team in load_teams(TEAMS_DIR) if isinstance(team.store, Valkey)]


@pytest.fixture(scope="module")
def played(firestore_emulator, tmp_path_factory):
    section = ValkeySection(
        PROJECT,
        firestore_emulator.host,
        tmp_path_factory.mktemp("valkey-demo"),
        FaultMix.parse(DEFAULT_FAULTS, SEED),
        SEED,
        on_valkey(),
        wall_seconds=20,
    )
    try:
        url = section.start()
        yield section, section.play_scheduled(), url
    finally:
        section.stop()
    assert section.pids() == [], "an instance is still running"


def test_the_valkey_row_is_ok_and_each_completed_run_took_effect_once(played):
    section, result, url = played
    text = report(result, url, section.rate)
    assert [f"{row.team}/{row.job}" for row in result.rows] == ["ledger/close"]
    assert result.ok and "FAIL" not in text, text
    assert [v.effects for v in result.verdicts if v.status == "completed"] == [1] * sum(
        v.status == "completed" for v in result.verdicts
    ), text
    assert sum(v.status == "completed" for v in result.verdicts) >= 4, text


def test_the_valkey_rows_runs_are_recorded_on_the_server_the_section_started(played):
    section, result, url = played
    assert url == section.server.url and url.startswith("valkey://127.0.0.1:")
    records = ValkeyLedger(url).records()
    assert {t.key for t in result.plan} <= set(records)
    assert {records[t.key]["status"] for t in result.plan} <= {"completed", "failed"}
    assert [(harness.name, harness.store) for harness in section.events] == [("ledger/entries", url)]


def test_a_valkey_run_that_took_effect_twice_fails_the_row(played):
    section, result, url = played
    victim = next(v.trigger.key for v in result.verdicts if v.status == "completed")
    again = firestore.Client(project=PROJECT).collection(OUTBOX).document(victim + "-again")
    again.create({"run_key": victim, "attempt_id": result.writers[victim][0]})  # by the same attempt
    try:
        judged = section.sim.judged(result.plan, result.journal)
        text = report(judged, url, section.rate)
        assert not judged.ok
        [bad] = [v for v in judged.verdicts if not v.ok]
        assert (bad.trigger.key, bad.effects, bad.problems) == (victim, 2, ("executed 2 times",)), text
        assert judged.rows[0].verdict == "FAIL (1 runs)" and "  FAIL ledger/close" in text, text
    finally:
        again.delete()
    assert section.sim.judged(result.plan, result.journal).ok


def test_the_section_plays_the_team_files_teams_on_valkey_at_the_rate_of_their_shortest_lease():
    [ledger] = on_valkey()
    section = ValkeySection(PROJECT, "127.0.0.1:9", Path("unused"), FaultMix(), SEED, [ledger])
    assert (section.teams, section.rate, section.span) == ([ledger], 81.0, timedelta(minutes=54))


def test_without_a_team_on_valkey_the_section_plays_the_example_job_and_event_function(tmp_path):
    section = ValkeySection(PROJECT, "127.0.0.1:9", tmp_path, FaultMix(), SEED, [])
    assert (section.teams, section.rate, section.span) == ([EXAMPLE_TEAM], 15.0, timedelta(minutes=10))
    try:
        url = section.start()
        assert [(harness.name, harness.store) for harness in section.events] == [(EXAMPLE_EVENT_JOB, url)]
    finally:
        section.stop()
