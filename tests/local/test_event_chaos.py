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
serves the module (about 80 s of wall time); each test asserts one property of its outcome (the
properties are tests/local/event_chaos.py's, which tests/hosts/test_event_chaos.py asserts on the
service hosts). The fault order is seeded.
"""

from __future__ import annotations

from collections import Counter

import pytest

from localscheduler.demos.events import EXAMPLE, ISOLATED, EventConfig, EventHarness, EventResult, fault_table
from tests.conftest import PROJECT
from tests.local.event_chaos import EventChaosProperties, published, show

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
# subscription); a maximum age that outlasts a killed message's lease plus the queue before it,
# and a wait that outlasts the late messages' release (`EventConfig.margin_problems`).
CONFIG = EventConfig(max_event_age_seconds=60, topics=6, instances=4, settle_seconds=240.0)


@pytest.fixture(scope="module")
def outcome(firestore_emulator, pubsub_emulator, tmp_path_factory) -> EventResult:
    harness = EventHarness(
        "chaos-events", EXAMPLE, MIX, SEED, PROJECT, tmp_path_factory.mktemp("events"), CONFIG
    )
    try:
        result = harness.run(pubsub_emulator.host)
    finally:
        harness.stop()
    show(result)
    return result


def test_at_least_500_messages_were_published_across_every_fault(outcome):
    faults = published(outcome)
    assert len(outcome.verdicts) >= 500 and faults == Counter(MIX)
    assert set(faults) == set(fault_table(CONFIG)) and min(faults.values()) >= 6
    assert set(ISOLATED) <= set(faults)


class TestOnFunctionsFramework(EventChaosProperties):
    """The event chaos properties on functions-framework instances."""
