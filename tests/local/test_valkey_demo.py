"""make demo's Valkey section (localscheduler.demos.valkey) at a small size: the example job on
functions-framework instances whose RUNONCE_STORE names the Valkey server the section starts,
played with the demo's fault mix on the accelerated clock and judged as every demo job is. Its
row is ok, each of its completed runs took effect exactly once and is recorded on the server, and
a second effect of a run (written to the outbox under another document id) turns the row, and so
the demo's exit code, to FAIL."""

from __future__ import annotations

from datetime import timedelta

import pytest
from google.cloud import firestore

from localscheduler.demo import DEFAULT_FAULTS
from localscheduler.demos.valkey import EVENT_JOB, ValkeySection, report
from localscheduler.scheduler.faults import FaultMix
from localscheduler.store import ValkeyLedger
from tests.conftest import PROJECT

SEED = 7
OUTBOX = "report_outbox"  # functions/report/local_demo.toml


@pytest.fixture(scope="module")
def played(firestore_emulator, tmp_path_factory):
    section = ValkeySection(
        PROJECT,
        firestore_emulator.host,
        tmp_path_factory.mktemp("valkey-demo"),
        FaultMix.parse(DEFAULT_FAULTS, SEED),
        SEED,
        span=timedelta(minutes=6),
    )
    try:
        url = section.start()
        yield section, section.play_scheduled(), url
    finally:
        section.stop()
    assert section.pids() == [], "an instance is still running"


def test_the_valkey_row_is_ok_and_each_completed_run_took_effect_once(played):
    _, result, url = played
    text = report(result, url)
    assert [f"{row.team}/{row.job}" for row in result.rows] == ["valkey/report"]
    assert result.ok and "FAIL" not in text, text
    assert [v.effects for v in result.verdicts if v.status == "completed"] == [1] * sum(
        v.status == "completed" for v in result.verdicts
    ), text
    assert sum(v.status == "completed" for v in result.verdicts) >= 5, text


def test_the_valkey_rows_runs_are_recorded_on_the_server_the_section_started(played):
    section, result, url = played
    assert url == section.server.url and url.startswith("valkey://127.0.0.1:")
    records = ValkeyLedger(url).records()
    assert {t.key for t in result.plan} <= set(records)
    assert {records[t.key]["status"] for t in result.plan} <= {"completed", "failed"}
    assert section.events is not None and section.events.name == EVENT_JOB
    assert section.events.store == url


def test_a_valkey_run_that_took_effect_twice_fails_the_row(played):
    section, result, url = played
    victim = next(v.trigger.key for v in result.verdicts if v.status == "completed")
    again = firestore.Client(project=PROJECT).collection(OUTBOX).document(victim + "-again")
    again.create({"run_key": victim, "attempt_id": result.writers[victim][0]})  # by the same attempt
    try:
        judged = section.sim.judged(result.plan, result.journal)
        text = report(judged, url)
        assert not judged.ok
        [bad] = [v for v in judged.verdicts if not v.ok]
        assert (bad.trigger.key, bad.effects, bad.problems) == (victim, 2, ("executed 2 times",)), text
        assert judged.rows[0].verdict == "FAIL (1 runs)" and "  FAIL valkey/report" in text, text
    finally:
        again.delete()
    assert section.sim.judged(result.plan, result.journal).ok
