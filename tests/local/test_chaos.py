"""Chaos suite: hundreds of scheduled runs across several jobs and two teams, every fault type
mixed in, real functions-framework instances, the real runonce library, the real emulator.

One simulation runs once for the module (about two minutes of wall time at 40x: 75 minutes
of schedule); each test asserts one property of its outcome. Fault choice is seeded: a failure
reproduces with the same SEED.
"""

from __future__ import annotations

import json
from collections import Counter
from datetime import UTC, datetime, timedelta

import pytest
from google.cloud import firestore

from localscheduler.faults import Fault, FaultMix
from localscheduler.report import fault_summary, render
from localscheduler.simulation import Simulation
from localscheduler.store import RUNS_COLLECTION
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
    instance_killed=0.07,
    retryable_failure=0.08,
    permanent_failure=0.04,
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


@pytest.fixture(scope="module")
def chaos(firestore_emulator, tmp_path_factory):
    """The simulation's result, the handler log lines, and this suite's ledger records."""
    sim = Simulation(
        TEAMS,
        START,
        SPAN,
        RATE,
        MIX,
        tmp_path_factory.mktemp("chaos"),
        "runonce-local",
        firestore_emulator.host,
        instances_per_job=2,
    )
    try:
        sim.start_instances()
        result = sim.run()
    finally:
        sim.stop()
    handler_log = [
        json.loads(line)
        for path in sorted(sim.log_dir.glob("*.log"))
        for line in path.read_text().splitlines()
        if line.startswith("{")
    ]
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
        f"{sum(t.forced for t in result.plan)} forced; "
        f"deliveries {len(sent)}; job bodies started {sum(r.get('attempts', 0) for r in records.values())}; "
        f"ledger records {len(records)}"
    )
    return result, handler_log, records


def test_the_suite_covers_at_least_200_scheduled_runs(chaos):
    result, _, _ = chaos
    assert sum(not trigger.forced for trigger in result.plan) >= 200


def test_every_fault_type_is_injected(chaos):
    result, _, _ = chaos
    sent = result.journal.sent()
    injected = Counter(s.fault for s in sent if s.attempt == 1 and not s.copy)
    missing = [fault.value for fault in Fault if fault is not Fault.NONE and injected[fault.value] == 0]
    assert not missing, f"faults never injected: {missing}"
    assert any(s.killed for s in sent), "no instance was killed mid-run"
    assert any(trigger.forced for trigger in result.plan), "no forced run"


def test_each_run_took_effect_exactly_once_within_its_retry_window(chaos):
    result, _, _ = chaos
    bad = [
        (
            v.trigger.run.team.name,
            v.trigger.run.job.name,
            v.trigger.run.schedule_time.isoformat(),
            v.trigger.forced,
            v.problems,
        )
        for v in result.verdicts
        if not v.ok
    ]
    assert not bad


def test_forced_runs_do_not_swallow_the_scheduled_run_they_borrow_the_time_from(chaos):
    result, _, _ = chaos
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


def test_a_job_body_ran_again_only_after_an_attempt_that_was_killed_or_failed_retryably(chaos):
    result, handler_log, _ = chaos
    retryable = Counter(line["run_key"] for line in handler_log if line.get("outcome") == "retry")
    killed = Counter((s.team, s.job, s.schedule_time, s.forced) for s in result.journal.sent() if s.killed)
    reran = 0
    for verdict in result.verdicts:
        if verdict.claims <= 1:
            continue
        reran += 1
        run = verdict.trigger.run
        explained = (
            retryable[verdict.trigger.key]
            + killed[(run.team.name, run.job.name, run.schedule_time, verdict.trigger.forced)]
        )
        assert verdict.claims - 1 <= explained, (
            f"{run.job.name} {run.schedule_time} started its body {verdict.claims} times, "
            "but the logs show only "
            f"{explained} unfinished earlier attempts"
        )
    assert reran > 0, "no run needed a second attempt; the faults did not bite"


def test_every_ledger_record_has_an_expiry(chaos):
    _, _, records = chaos
    assert records
    assert [key for key, record in records.items() if "expire_at" not in record] == []
