"""Chaos suite: hundreds of scheduled runs across several jobs and two teams, every fault type
mixed in (the instance killed after the job's effect and before its completion too), real
functions-framework instances, the real runonce library, the real emulator.

It proves the guarantee as docs/library.md states it: at most one attempt holds a run at a time, a
job body starts again only after an attempt died or failed retryably, and a job whose effect is
keyed by the run key (the example job's outbox) has its effect exactly once; without that key,
the kill after the effect gives a run two effects.

One simulation runs once for the module (about two minutes of wall time at 40x: 75 minutes
of schedule); each test asserts one property of its outcome. The properties are
tests/local/chaos.py's, which tests/hosts/test_chaos.py asserts on the service hosts.
Fault choice is seeded: a failure reproduces with the same SEED.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from localscheduler.scheduler.faults import FaultMix
from tests.local.chaos import ChaosProperties, chaos_teams, ledger_records, show, simulate, unkeyed_team

SEED = 20260329
RATE = 40.0
SPAN = timedelta(minutes=75)
START = datetime(2026, 3, 29, 0, 30, tzinfo=UTC)  # spans Europe/Berlin's switch to summer time
MIX = FaultMix(
    seed=SEED,
    duplicate_delivery=0.08,
    lost_response=0.08,
    short_deadline=0.07,
    instance_killed=0.05,
    retryable_failure=0.08,
    permanent_failure=0.04,
    killed_after_effect=0.05,
    forced_run=0.08,
)
TEAMS = chaos_teams()


@pytest.fixture(scope="module")
def chaos(firestore_emulator, tmp_path_factory):
    """The simulation's result and this suite's ledger records."""
    result = simulate(
        TEAMS, START, SPAN, RATE, MIX, tmp_path_factory.mktemp("chaos"), firestore_emulator.host
    )
    records = ledger_records(TEAMS)
    show(result, records)
    return result, records


def test_the_suite_covers_at_least_200_scheduled_runs(chaos):
    result, _ = chaos
    assert sum(not trigger.forced for trigger in result.plan) >= 200


@pytest.fixture(scope="module")
def unkeyed(firestore_emulator, tmp_path_factory):
    """A short simulation of a job whose effect is not keyed by the run key, 40% of its runs
    killed right after the effect."""
    team = unkeyed_team(tmp_path_factory.mktemp("unkeyed-job"))
    mix = FaultMix(seed=SEED, killed_after_effect=0.4)
    log_dir = tmp_path_factory.mktemp("unkeyed")
    return simulate([team], START, timedelta(minutes=8), RATE, mix, log_dir, firestore_emulator.host)


class TestOnFunctionsFramework(ChaosProperties):
    """The chaos properties on functions-framework instances."""
