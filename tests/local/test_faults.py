"""Fault choice: seeded, at the configured rates, and forced runs the handler can recognise."""

from datetime import UTC, datetime, timedelta

import pytest

from localscheduler.scheduler.faults import Fault, FaultMix
from localscheduler.scheduler.plan import planned_runs
from stacks.team import Job, Team

JOB = Job(name="sync", schedule="*/2 * * * *", source="report")
TEAM = Team(name="t", project="p", region="europe-west1", jobs=[JOB])
RUNS = planned_runs(TEAM, JOB, datetime(2026, 1, 1, tzinfo=UTC), datetime(2026, 1, 3, tzinfo=UTC))


def test_the_same_seed_picks_the_same_faults():
    mix = FaultMix(seed=3, duplicate_delivery=0.2, instance_killed=0.2)
    assert [mix.fault_for(run) for run in RUNS] == [
        FaultMix(seed=3, duplicate_delivery=0.2, instance_killed=0.2).fault_for(run) for run in RUNS
    ]


def test_each_fault_hits_about_its_rate_of_runs():
    mix = FaultMix(seed=1, lost_response=0.25, permanent_failure=0.1)
    chosen = [mix.fault_for(run) for run in RUNS]
    assert abs(chosen.count(Fault.LOST_RESPONSE) / len(RUNS) - 0.25) < 0.05
    assert abs(chosen.count(Fault.PERMANENT_FAILURE) / len(RUNS) - 0.1) < 0.05


def test_a_forced_run_comes_while_its_schedule_time_is_still_clearly_in_the_future():
    mix = FaultMix(seed=1, forced_run=1.0)
    for run in RUNS:
        assert run.next_time - mix.forced_run_at(run, forced_skew=60) > timedelta(seconds=60)


def test_rates_that_add_up_to_more_than_one_are_rejected():
    with pytest.raises(ValueError, match="more than 1"):
        FaultMix(duplicate_delivery=0.6, lost_response=0.6)


def test_an_unknown_fault_name_is_rejected_with_the_known_ones():
    with pytest.raises(ValueError, match="instance_killed"):
        FaultMix.parse("instance_kill=0.1", seed=1)


def test_a_forced_run_is_never_killed_while_scheduled_runs_are():
    mix = FaultMix(seed=5, instance_killed=0.3, killed_after_effect=0.3)
    assert {mix.fault_for(run, forced=True) for run in RUNS} == {Fault.NONE}
    assert {Fault.INSTANCE_KILLED, Fault.KILLED_AFTER_EFFECT} <= {mix.fault_for(run) for run in RUNS}
