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

from localscheduler.demos.simulation import Result, Simulation
from localscheduler.scheduler.faults import FaultMix
from stacks.team import Job, Team
from tests.conftest import PROJECT
from tests.local.chaos import FAST_RETRY, ChaosProperties, chaos_job, chaos_jobs, ledger_records, show

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
TEAMS = [
    Team(
        name="chaos",
        project="runonce-chaos",
        region="europe-west1",
        jobs=chaos_jobs(),
    ),
    # Same job id in another project and region: a run of its own, never a duplicate of the above.
    Team(
        name="chaos-west",
        project="runonce-chaos-west",
        region="us-central1",
        jobs=[
            chaos_job("every-minute", "* * * * *", "America/Los_Angeles"),
        ],
    ),
]


def _simulate(teams: list[Team], span: timedelta, mix: FaultMix, log_dir, emulator_host: str) -> Result:
    """Serve the teams' jobs with three instances each and play `span` of schedule with `mix`."""
    sim = Simulation(teams, START, span, RATE, mix, log_dir, PROJECT, emulator_host, instances_per_job=3)
    try:
        sim.start_instances()
        return sim.run()
    finally:
        sim.stop()


@pytest.fixture(scope="module")
def chaos(firestore_emulator, tmp_path_factory):
    """The simulation's result and this suite's ledger records."""
    result = _simulate(TEAMS, SPAN, MIX, tmp_path_factory.mktemp("chaos"), firestore_emulator.host)
    records = ledger_records(TEAMS)
    show(result, records)
    return result, records


def test_the_suite_covers_at_least_200_scheduled_runs(chaos):
    result, _ = chaos
    assert sum(not trigger.forced for trigger in result.plan) >= 200


# The example job (loaded from EXAMPLE, which the fixture sets) with its effect appended, `add()`,
# instead of created on the run key.
UNKEYED_JOB = """
import importlib.util

_spec = importlib.util.spec_from_file_location("report_job", EXAMPLE)
report_job = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(report_job)


def _append(run):
    outbox = report_job._client().collection(report_job.OUTBOX)
    outbox.add({"run_key": run.key, "job": run.job, "attempt_id": run.attempt_id})
    return True


report_job.publish = _append
handle = report_job.handle
"""


@pytest.fixture(scope="module")
def unkeyed(firestore_emulator, tmp_path_factory):
    """A short simulation of a job whose effect is not keyed by the run key, 40% of its runs
    killed right after the effect."""
    source = tmp_path_factory.mktemp("unkeyed-job")
    example = Job(name="report", schedule="* * * * *", source="report").source_dir / "main.py"
    (source / "main.py").write_text(f"EXAMPLE = {str(example)!r}\n" + UNKEYED_JOB)
    (source / "local_demo.toml").write_text((example.parent / "local_demo.toml").read_text())
    job = Job(
        name="unkeyed",
        schedule="* * * * *",
        source=str(source),
        timeout_seconds=30,
        attempt_deadline_seconds=15,
        retry=FAST_RETRY,
    )
    team = Team(name="unkeyed", project="runonce-unkeyed", region="europe-west1", jobs=[job])
    mix = FaultMix(seed=SEED, killed_after_effect=0.4)
    return _simulate(
        [team], timedelta(minutes=8), mix, tmp_path_factory.mktemp("unkeyed"), firestore_emulator.host
    )


class TestOnFunctionsFramework(ChaosProperties):
    """The chaos properties on functions-framework instances."""
