"""Chaos suite: hundreds of scheduled runs across several jobs and two teams, every fault type
mixed in (the instance killed after the job's effect and before its completion too), real
functions-framework instances, the real runonce library, the real emulator.

It proves the guarantee as docs/library.md states it: at most one attempt holds a run at a time, a
job body starts again only after an attempt died or failed retryably, and a job whose effect is
keyed by the run key (the example job's outbox) has its effect exactly once; without that key,
the kill after the effect gives a run two effects.

One simulation runs once for the module (about two minutes of wall time at 40x: 75 minutes
of schedule); each test asserts one property of its outcome. Fault choice is seeded: a failure
reproduces with the same SEED.
"""

from __future__ import annotations

from collections import Counter
from datetime import UTC, datetime, timedelta

import pytest
from google.cloud import firestore

from localscheduler.demos.simulation import Result, Simulation
from localscheduler.scheduler.faults import Fault, FaultMix
from localscheduler.store import RUNS_COLLECTION
from localscheduler.verdicts.scheduled import fault_summary, guarantee_summary, render
from stacks.team import Job, Retry, Team

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
# Retries at 1, 3, 7, 15, 25 s: a killed attempt's run is taken over well inside its minute.
FAST_RETRY = Retry(retry_count=5, min_backoff_seconds=1, max_backoff_seconds=10, max_doublings=3)


def _job(name: str, schedule: str, time_zone: str, retry: Retry) -> Job:
    return Job(
        name=name,
        schedule=schedule,
        time_zone=time_zone,
        source="report",
        timeout_seconds=30,
        attempt_deadline_seconds=15,
        retry=retry,
    )


TEAMS = [
    Team(
        name="chaos",
        project="runonce-chaos",
        region="europe-west1",
        jobs=[
            _job("every-minute", "* * * * *", "Etc/UTC", FAST_RETRY),
            _job(
                "berlin-even",
                "*/2 * * * *",
                "Europe/Berlin",
                Retry(retry_count=5, min_backoff_seconds=5, max_backoff_seconds=60),
            ),
            _job("new-york-third", "*/3 * * * *", "America/New_York", Retry()),
        ],
    ),
    # Same job id in another project and region: a run of its own, never a duplicate of the above.
    Team(
        name="chaos-west",
        project="runonce-chaos-west",
        region="us-central1",
        jobs=[
            _job("every-minute", "* * * * *", "America/Los_Angeles", FAST_RETRY),
        ],
    ),
]


def _simulate(teams: list[Team], span: timedelta, mix: FaultMix, log_dir, emulator_host: str) -> Result:
    """Serve the teams' jobs with three instances each and play `span` of schedule with `mix`."""
    sim = Simulation(
        teams, START, span, RATE, mix, log_dir, "runonce-local", emulator_host, instances_per_job=3
    )
    try:
        sim.start_instances()
        return sim.run()
    finally:
        sim.stop()


@pytest.fixture(scope="module")
def chaos(firestore_emulator, tmp_path_factory):
    """The simulation's result and this suite's ledger records."""
    result = _simulate(TEAMS, SPAN, MIX, tmp_path_factory.mktemp("chaos"), firestore_emulator.host)
    projects = {team.project for team in TEAMS}
    records = {
        doc.id: doc.to_dict()
        for doc in firestore.Client(project="runonce-local").collection(RUNS_COLLECTION).stream()
        if doc.to_dict().get("project") in projects
    }
    sent = result.journal.sent()
    print()
    print(render(result.rows))
    print(fault_summary(result.journal) + f"; instances replaced: {result.restarts}")
    print(
        f"runs: {sum(not t.forced for t in result.plan)} scheduled + "
        f"{sum(t.forced for t in result.plan)} forced; deliveries {len(sent)}; ledger records {len(records)}"
    )
    print("\n".join(guarantee_summary(result.verdicts)))
    for verdict in result.verdicts:
        if not verdict.ok:
            run = verdict.trigger.run
            print(f"  FAIL {run.team.name}/{run.job.name} {run.schedule_time:%H:%M} {verdict.problems}")
    return result, records


def test_the_suite_covers_at_least_200_scheduled_runs(chaos):
    result, _ = chaos
    assert sum(not trigger.forced for trigger in result.plan) >= 200


def test_every_fault_type_is_injected(chaos):
    result, _ = chaos
    sent = result.journal.sent()
    injected = Counter(s.fault for s in sent if s.attempt == 1 and not s.copy)
    missing = [fault.value for fault in Fault if fault is not Fault.NONE and injected[fault.value] == 0]
    assert not missing, f"faults never injected: {missing}"
    assert any(s.killed for s in sent), "no instance was killed mid-run"
    assert any(trigger.forced for trigger in result.plan), "no forced run"


def _failing(result, *fragments: str) -> list:
    """The runs whose verdict names a problem containing one of `fragments`."""
    return [
        (v.trigger.run.job.name, v.trigger.run.schedule_time.isoformat(), v.trigger.forced, problem)
        for v in result.verdicts
        for problem in v.problems
        if any(fragment in problem for fragment in fragments)
    ]


def test_every_run_passes_its_verdict(chaos):
    result, _ = chaos
    assert _failing(result, "") == []


def test_each_run_has_exactly_one_effect_or_one_recorded_permanent_failure_within_its_window(chaos):
    result, _ = chaos
    assert _failing(result, "executed", "never", "retry window", "effect written by") == []
    assert all(v.effects + (v.status == "failed") == 1 for v in result.verdicts)


def test_no_two_bodies_of_one_run_ever_ran_at_the_same_time(chaos):
    result, _ = chaos
    assert _failing(result, "at the same time", "never ended") == []


def test_a_run_is_finished_by_the_attempt_that_ran_its_last_body(chaos):
    result, _ = chaos
    assert _failing(result, "finished by attempt") == []


def test_a_body_ran_again_only_after_its_attempt_was_killed_or_failed_retryably(chaos):
    result, _ = chaos
    assert _failing(result, "started again") == []
    assert sum(v.bodies > 1 for v in result.verdicts) > 0, "no run needed a second body; faults did not bite"


def _killed_after_effect(result) -> list:
    """The verdicts of the runs whose instance died right after the job's effect."""
    killed = {
        (s.team, s.job, s.schedule_time, s.forced)
        for s in result.journal.sent()
        if s.fault == Fault.KILLED_AFTER_EFFECT.value and s.killed
    }
    return [
        v
        for v in result.verdicts
        if (v.trigger.run.team.name, v.trigger.run.job.name, v.trigger.run.schedule_time, v.trigger.forced)
        in killed
    ]


def test_a_run_killed_after_its_effect_ran_its_body_again_and_still_has_one_effect(chaos):
    result, _ = chaos
    hit = _killed_after_effect(result)
    assert len(hit) >= 3
    assert [(v.status, v.effects, v.bodies >= 2, v.found_effect) for v in hit] == [
        ("completed", 1, True, 1)
    ] * len(hit)


def test_only_a_body_after_a_kill_after_the_effect_found_the_effect_already_written(chaos):
    result, _ = chaos
    assert _failing(result, "which started no body") == []
    found = [v.trigger.key for v in result.verdicts if v.found_effect]
    assert found
    assert set(found) <= {v.trigger.key for v in _killed_after_effect(result)}


def test_forced_runs_do_not_swallow_the_scheduled_run_they_borrow_the_time_from(chaos):
    result, _ = chaos
    verdicts = {
        (v.trigger.run.team.name, v.trigger.run.job.name, v.trigger.run.schedule_time, v.trigger.forced): v
        for v in result.verdicts
    }
    borrowed = [key for key in verdicts if key[3]]
    assert borrowed
    for team, job, moment, _ in borrowed:
        scheduled = verdicts.get((team, job, moment, False))
        if scheduled is not None:
            assert scheduled.status in ("completed", "failed") and scheduled.ok


def test_every_ledger_record_has_an_expiry(chaos):
    _, records = chaos
    assert records
    assert [key for key, record in records.items() if "expire_at" not in record] == []


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


def test_without_the_run_key_a_kill_after_the_effect_gives_the_run_a_second_effect(unkeyed):
    rerun = [v for v in _killed_after_effect(unkeyed) if v.bodies >= 2]
    assert len(rerun) >= 2
    assert {(v.status, v.effects) for v in rerun} == {("completed", 2)}
    assert all("executed 2 times" in v.problems for v in rerun)
