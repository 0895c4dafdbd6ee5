"""The chaos suite on a Valkey store: the chaos teams' jobs (tests/local/chaos.py) served by real
functions-framework instances whose RUNONCE_STORE names a real Valkey server (redis-server where
Valkey is not installed), every fault type mixed in, the instance killed after the job's effect
and before its completion too. Only the run store moves: the jobs' effects stay in the Firestore
emulator, where the judges read them, and the ledger records are read from the server.

The server judges leases on its own clock, at wall speed, so the instances get the lease in whole
wall seconds (localscheduler.demos.simulation): at RATE 15 the every-minute jobs' lease is one
wall second, the 15 s of schedule it is on Firestore, and it ends before their last retry. A
shorter span than tests/local/test_chaos.py's keeps the wall time near its two minutes; the
properties are the same (`ChaosProperties`), each asserted on one simulation's outcome. Fault
choice is seeded.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from google.cloud import firestore

from localscheduler.scheduler.faults import FaultMix
from localscheduler.store import RUNS_COLLECTION, ValkeyLedger
from tests.conftest import PROJECT
from tests.local.chaos import ChaosProperties, chaos_teams, ledger_records, show, simulate, unkeyed_team

SEED = 20260329
RATE = 15.0
SPAN = timedelta(minutes=22)
START = datetime(2026, 3, 29, 0, 50, tzinfo=UTC)  # spans Europe/Berlin's switch to summer time
MIX = FaultMix(
    seed=SEED,
    duplicate_delivery=0.08,
    lost_response=0.08,
    short_deadline=0.07,
    instance_killed=0.07,
    retryable_failure=0.08,
    permanent_failure=0.04,
    killed_after_effect=0.08,
    forced_run=0.08,
)
SUFFIX = "-valkey"
"""Projects of their own: tests/local/test_chaos.py may play the same schedule on the same emulator."""
TEAMS = chaos_teams(SUFFIX)


@pytest.fixture(scope="module")
def chaos(valkey_url, firestore_emulator, tmp_path_factory):
    """The simulation's result and this suite's ledger records, read from the Valkey server."""
    log_dir = tmp_path_factory.mktemp("valkey-chaos")
    result = simulate(TEAMS, START, SPAN, RATE, MIX, log_dir, firestore_emulator.host, valkey_url)
    records = ledger_records(TEAMS, ValkeyLedger(valkey_url))
    show(result, records)
    return result, records


def test_the_runs_were_kept_on_the_valkey_server_and_not_in_firestore(chaos, valkey_url):
    result, records = chaos
    keys = {trigger.key for trigger in result.plan}
    assert keys & set(records)
    in_firestore = {doc.id for doc in firestore.Client(project=PROJECT).collection(RUNS_COLLECTION).stream()}
    assert keys & in_firestore == set()


@pytest.fixture(scope="module")
def unkeyed(valkey_url, firestore_emulator, tmp_path_factory):
    """A short simulation of a job whose effect is not keyed by the run key, 40% of its runs
    killed right after the effect, on the Valkey server."""
    team = unkeyed_team(tmp_path_factory.mktemp("valkey-unkeyed-job"), SUFFIX)
    mix = FaultMix(seed=SEED, killed_after_effect=0.4)
    log_dir = tmp_path_factory.mktemp("valkey-unkeyed")
    return simulate(
        [team], START, timedelta(minutes=8), RATE, mix, log_dir, firestore_emulator.host, valkey_url
    )


class TestOnValkey(ChaosProperties):
    """The chaos properties on functions-framework instances keeping their runs on Valkey."""
