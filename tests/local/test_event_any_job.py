"""The local event harness serves and judges any event job the same way: a job from another folder,
which logs nothing of its own and keeps its effects in a collection with field names of its own,
is judged from the ledger, the body lines the runonce core writes, the effects its folder declares
and the dead letters; a job whose folder declares no effects is judged on the ledger, its bodies
and the dead letters, and the table shows its effects as n/a.

Both jobs get the faults that need nothing from the job (made by the push proxy): lost acks,
duplicate pushes, instances killed while they hold the message's claim, messages held until they
are too old. Two harnesses, started one after the other, play side by side on one Pub/Sub
emulator, each in a project of its own.
"""

from __future__ import annotations

from collections import Counter
from concurrent.futures import ThreadPoolExecutor

import pytest

from localscheduler.demos.events import (
    GENERIC_FAULTS,
    TEAM_CONFIG,
    EventFunction,
    EventHarness,
    EventResult,
    fault_table,
)
from localscheduler.verdicts.events import event_summary, render_events
from tests.conftest import PROJECT

SHIPPER = """
import functions_framework
from google.api_core.exceptions import AlreadyExists
from google.cloud import firestore

from runonce import current_run, deduplicated_event


@functions_framework.http
@deduplicated_event
def ship(event):
    run = current_run()
    parcel = event.json()["parcel"]
    try:
        firestore.Client().collection("shipments").document(run.key).create(
            {"for_event": run.key, "by_attempt": run.attempt_id, "parcel": parcel}
        )
    except AlreadyExists:
        pass
    return "shipped"
"""
SHIPPER_FILE = """
[effects]
collection = "shipments"
run_key_field = "for_event"
attempt_id_field = "by_attempt"

[events]
data = '{"parcel": "P-{n}"}'
"""
QUIET = """
import functions_framework

from runonce import deduplicated_event


@functions_framework.http
@deduplicated_event
def handle(event):
    event.json()["n"]
    return "done"
"""
MIX = {"none": 12, "lost_ack": 3, "duplicate_push": 3, "killed_holding_claim": 4, "too_old": 2}
TIMEOUT_SECONDS = 120.0


@pytest.fixture(scope="module")
def outcomes(firestore_emulator, pubsub_emulator, tmp_path_factory) -> dict[str, EventResult]:
    shipper = tmp_path_factory.mktemp("shipper")
    (shipper / "main.py").write_text(SHIPPER)
    (shipper / "local_demo.toml").write_text(SHIPPER_FILE)
    quiet = tmp_path_factory.mktemp("quiet")
    (quiet / "main.py").write_text(QUIET)
    harnesses = [
        EventHarness(
            name,
            function,
            MIX,
            seed,
            PROJECT,
            tmp_path_factory.mktemp(f"{function.source_dir.name}-logs"),
            TEAM_CONFIG,
        )
        for name, function, seed in [
            ("others/shipper", EventFunction(shipper, "ship"), 3),
            ("others/quiet", EventFunction(quiet), 4),
        ]
    ]
    try:
        for harness in harnesses:
            harness.start(pubsub_emulator.host)
        with ThreadPoolExecutor(len(harnesses)) as pool:
            results = list(pool.map(lambda harness: harness.play(TIMEOUT_SECONDS), harnesses))
    finally:
        for harness in harnesses:
            harness.stop()
    print()
    print(render_events([result.row for result in results]))
    for result in results:
        print(result.row.job, result.faults(), f"; {result.seconds:.0f} s")
        print("\n".join(event_summary(result.verdicts, result.strays)))
    return {harness.name: result for harness, result in zip(harnesses, results, strict=True)}


def _problems(result: EventResult) -> list[str]:
    return [
        f"{v.message.message_id} ({v.message.fault}): {'; '.join(v.problems)}"
        for v in result.verdicts
        if not v.ok
    ]


def _fates(result: EventResult) -> Counter:
    return Counter((v.message.fault, v.fate) for v in result.verdicts)


def _expected_fates() -> Counter:
    table = fault_table(TEAM_CONFIG)
    return Counter({(fault, table[fault][1]): count for fault, count in MIX.items()})


def test_the_mix_is_the_faults_that_need_nothing_from_the_job():
    assert set(MIX) == set(GENERIC_FAULTS)


def test_a_job_from_another_folder_ends_each_message_once_by_its_declared_effects(outcomes):
    shipper = outcomes["others/shipper"]
    assert shipper.settled and shipper.strays == [] and _problems(shipper) == []
    assert _fates(shipper) == _expected_fates()
    completed = [v for v in shipper.verdicts if v.fate == "completed"]
    assert [v.effects for v in completed] == [1] * (len(shipper.verdicts) - MIX["too_old"])
    assert shipper.row.effects == len(completed)


def test_its_bodies_are_read_from_the_core_s_lines_though_the_job_logs_nothing(outcomes):
    shipper = outcomes["others/shipper"]
    assert all(v.bodies >= 1 for v in shipper.verdicts if v.fate == "completed")
    assert [v.bodies for v in shipper.verdicts if v.fate == "too_old"] == [0] * MIX["too_old"]


def test_an_instance_killed_holding_the_claim_is_taken_over_by_one_more_body(outcomes):
    for result in outcomes.values():
        died = {p.message_id for p in result.pushes if p.outcome == "instance_died"}
        killed = [v for v in result.verdicts if v.message.fault == "killed_holding_claim"]
        assert {v.message.message_id for v in killed} == died
        assert [(v.bodies, v.fate) for v in killed] == [(2, "completed")] * MIX["killed_holding_claim"]
    assert outcomes["others/shipper"].restarts >= MIX["killed_holding_claim"]


def test_a_duplicate_push_and_a_lost_ack_run_one_body(outcomes):
    for result in outcomes.values():
        pushes = Counter(p.message_id for p in result.pushes)
        for v in result.verdicts:
            if v.message.fault in ("duplicate_push", "lost_ack"):
                assert pushes[v.message.message_id] >= 2 and v.bodies == 1, v
        outcome = Counter(p.outcome for p in result.pushes)
        assert outcome["lost_ack"] == MIX["lost_ack"]
        assert outcome["duplicate"] + outcome["in_progress"] >= MIX["lost_ack"] + MIX["duplicate_push"]


def test_a_job_that_declares_no_effects_is_judged_on_the_ledger_its_bodies_and_dead_letters(outcomes):
    quiet = outcomes["others/quiet"]
    assert quiet.settled and quiet.strays == [] and _problems(quiet) == []
    assert _fates(quiet) == _expected_fates()
    assert all(v.effects is None for v in quiet.verdicts) and quiet.row.effects is None
    assert render_events([quiet.row]).splitlines()[-1].split()[4] == "n/a"
    assert event_summary(quiet.verdicts, quiet.strays)[-1].startswith("effects not observed")
