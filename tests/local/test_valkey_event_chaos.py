"""The event chaos suite on a Valkey store: messages published to the real Pub/Sub emulator with
every event fault mixed in, pushed through real push subscriptions to real functions-framework
instances serving functions/events_example under @deduplicated_event, whose RUNONCE_STORE names a
real Valkey server (redis-server where Valkey is not installed). Only the run store moves: the
effects stay in the Firestore emulator and the dead letters in Pub/Sub, where the judges read
them; the ledger is read from the server (under a key prefix of the harness's own).

Events run on the real clock, which is the server's too, so the lease and the maximum event age
are the demo's (EventConfig's defaults). Fewer messages than tests/local/test_event_chaos.py's
500, every fault at least 6 times; one harness run serves the module, each test asserts one
property of its outcome (`EventChaosProperties`). The fault order is seeded.
"""

from __future__ import annotations

from collections import Counter

import pytest
from google.cloud import firestore

from localscheduler.demos.events import EXAMPLE, EventConfig, EventHarness, fault_table
from localscheduler.store import RUNS_COLLECTION, ValkeyLedger
from tests.conftest import PROJECT
from tests.local.event_chaos import EventChaosProperties, published, show

SEED = 20260329
MIX = {
    "none": 60,
    "slow": 6,
    "lost_ack": 10,
    "duplicate_push": 6,
    "killed_holding_claim": 6,
    "retryable": 10,
    "kill_before_effect": 6,
    "kill_after_effect": 6,
    "permanent": 8,
    "too_old": 6,
    "attempts_exhausted": 6,
}
CONFIG = EventConfig()
TIMEOUT_SECONDS = 180.0


@pytest.fixture(scope="module")
def played(valkey_url, firestore_emulator, pubsub_emulator, tmp_path_factory):
    """The harness, after one run, and its outcome."""
    harness = EventHarness(
        "valkey-events",
        EXAMPLE,
        MIX,
        SEED,
        PROJECT,
        tmp_path_factory.mktemp("valkey-events"),
        CONFIG,
        valkey_url,
    )
    try:
        result = harness.run(pubsub_emulator.host, TIMEOUT_SECONDS)
    finally:
        harness.stop()
    show(result)
    return harness, result


@pytest.fixture(scope="module")
def outcome(played):
    return played[1]


def test_every_event_fault_was_published_at_least_6_times(outcome):
    faults = published(outcome)
    assert faults == Counter(MIX) and set(faults) == set(fault_table(CONFIG))
    assert min(faults.values()) >= 6


def test_the_runs_were_kept_on_the_valkey_server_and_not_in_firestore(played, valkey_url):
    harness, outcome = played
    records = ValkeyLedger(valkey_url, harness.collection).records()
    completed = {key for key, record in records.items() if record.get("status") == "completed"}
    assert completed == {v.message.key for v in outcome.verdicts if v.fate == "completed"}
    assert set(records) <= {v.message.key for v in outcome.verdicts}
    assert list(firestore.Client(project=harness.project).collection(RUNS_COLLECTION).stream()) == []


class TestOnValkey(EventChaosProperties):
    """The event chaos properties on functions-framework instances keeping their runs on Valkey."""
