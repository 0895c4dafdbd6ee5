"""Event chaos suite: 500 messages published to the real Pub/Sub emulator with every event fault
mixed in (slow jobs past the ack deadline, lost acks, duplicate pushes, transient, permanent and
never-ending failures, instances killed holding the claim, before and right after the effect,
messages that arrive too old), pushed through real push subscriptions (retry policy, ack
deadline, dead-letter policy) to real functions-framework instances serving
functions/events_example under @deduplicated_event.

It proves the event guarantee from the emulators' state, not from what the harness saw, judged
as any event job is (localscheduler.verdicts.events): every published messageId has exactly one
effect (the outbox document its folder's local_demo.toml declares, with the ledger record
completed) or exactly one copy in the dead-letter subscription with its reason (runonce's own for
permanent failures and too old events, recorded on the failed ledger record; Pub/Sub's for
exhausted deliveries); none is lost; no body of a message (read from the lines the runonce core
logs) starts again after one that ended normally, nor while another one runs. One harness run
serves the module (about 80 s of wall time); each test asserts one property of its outcome. The
fault order is seeded.
"""

from __future__ import annotations

from collections import Counter

import pytest

from localscheduler.demos.events import EXAMPLE, ISOLATED, EventConfig, EventHarness, EventResult, fault_table
from localscheduler.verdicts.events import event_summary, render_events
from tests.conftest import PROJECT

SEED = 20260329
MIX = {
    "none": 350,
    "slow": 6,
    "lost_ack": 30,
    "duplicate_push": 8,
    "killed_holding_claim": 8,
    "retryable": 30,
    "kill_before_effect": 8,
    "kill_after_effect": 8,
    "permanent": 25,
    "too_old": 15,
    "attempts_exhausted": 12,
}
# More shared topics and instances than the demo's (500 messages, at most 2 pushes at a time per
# subscription); a maximum age that outlasts a killed message's lease plus the queue before it.
CONFIG = EventConfig(max_event_age_seconds=60, topics=6, instances=4)
TIMEOUT_SECONDS = 240.0


@pytest.fixture(scope="module")
def outcome(firestore_emulator, pubsub_emulator, tmp_path_factory) -> EventResult:
    harness = EventHarness(
        "chaos-events", EXAMPLE, MIX, SEED, PROJECT, tmp_path_factory.mktemp("events"), CONFIG
    )
    try:
        result = harness.run(pubsub_emulator.host, TIMEOUT_SECONDS)
    finally:
        harness.stop()
    print()
    print(render_events([result.row]))
    print(result.faults(), f"; {result.seconds:.0f} s")
    for line in event_summary(result.verdicts, result.strays):
        print(line)
    return result


def test_at_least_500_messages_were_published_across_every_fault(outcome):
    faults = Counter(v.message.fault for v in outcome.verdicts)
    assert len(outcome.verdicts) >= 500
    assert set(faults) == set(fault_table(CONFIG)) and min(faults.values()) >= 6


def test_every_message_ended_before_the_timeout(outcome):
    assert outcome.settled


def test_every_message_has_exactly_one_effect_or_one_dead_letter_and_none_ran_twice(outcome):
    bad = [
        f"{v.message.message_id} ({v.message.fault}): {'; '.join(v.problems)}"
        for v in outcome.verdicts
        if not v.ok
    ]
    assert bad == []


def test_no_dead_letter_belongs_to_an_unpublished_message(outcome):
    assert outcome.strays == []


def test_effects_and_dead_letters_add_up_to_the_published_messages(outcome):
    row = outcome.row
    assert row.effects + row.dead_lettered == row.published
    assert row.effects == sum(
        count for fault, count in MIX.items() if fault_table(CONFIG)[fault][1] == "completed"
    )


def test_each_fault_ends_as_it_must(outcome):
    table = fault_table(CONFIG)
    fates = Counter((v.message.fault, v.fate) for v in outcome.verdicts)
    assert fates == Counter({(fault, table[fault][1]): count for fault, count in MIX.items()})


def test_a_body_run_again_after_a_kill_that_followed_the_effect_found_the_effect(outcome):
    killed = [v for v in outcome.verdicts if v.message.fault == "kill_after_effect"]
    assert [(v.effects, v.found) for v in killed] == [(1, 1)] * MIX["kill_after_effect"]


def test_the_faults_really_happened(outcome):
    pushes = Counter(p.outcome for p in outcome.pushes)
    assert pushes["lost_ack"] == MIX["lost_ack"]  # each lost once, then answered duplicate
    assert pushes["duplicate"] >= MIX["lost_ack"]
    assert pushes["instance_died"] >= MIX["kill_before_effect"] + MIX["kill_after_effect"]
    assert outcome.restarts >= MIX["kill_before_effect"] + MIX["kill_after_effect"]
    assert pushes["in_progress"] >= MIX["slow"]  # the ack deadline passed while the slow jobs ran
    assert outcome.row.deliveries > outcome.row.published
    assert set(ISOLATED) <= set(MIX)
