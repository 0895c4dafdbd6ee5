"""The runs the local scheduler loses on purpose: a run never delivered leaves no ledger record,
and a stuck claim is left in_progress once Scheduler's retries ran out, every body killed holding
it. Both are judged as expected misses; the rest of the runs are judged as always.

The placement is checked without a store; the two misses on the real emulator, in one short
simulation of the example job (8 minutes of schedule at 40x).
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from google.cloud import firestore

from localscheduler.demo import main as demo_main
from localscheduler.demos.simulation import Result, Simulation
from localscheduler.picture import Mark, lanes, save
from localscheduler.scheduler.cloud_scheduler import triggers
from localscheduler.scheduler.faults import FaultMix
from localscheduler.scheduler.misses import PlannedMisses
from localscheduler.scheduler.plan import planned_runs
from localscheduler.store import RUNS_COLLECTION
from localscheduler.verdicts.scheduled import guarantee_summary
from runonce.contract import MissedRun
from runonce.scheduler.expected import scheduled_key
from stacks.naming import scheduler_job_name
from stacks.team import Job, Retry, Team
from tests.local.played import play

START = datetime(2026, 3, 29, 1, 0, tzinfo=UTC)
SPAN = timedelta(minutes=8)
# Retries 1, 3, 7, 15 and 25 s after the first attempt; the demo's lease is 60% of 25 s.
RETRY = Retry(retry_count=5, min_backoff_seconds=1, max_backoff_seconds=10, max_doublings=3)
JOB = Job(
    name="report",
    schedule="*/2 * * * *",
    source="report",
    timeout_seconds=30,
    attempt_deadline_seconds=15,
    retry=RETRY,
)
TEAM = Team(name="misses", project="runonce-misses", region="europe-west1", jobs=[JOB])


def _plan(misses: PlannedMisses, mix: FaultMix | None = None, span: timedelta = SPAN):
    runs = planned_runs(TEAM, JOB, START, START + span)
    return misses.place(triggers(runs, mix or FaultMix(), 60), START, START + span)


@pytest.mark.fast
def test_the_misses_fall_on_distinct_scheduled_runs_in_the_first_half_of_the_window():
    plan = _plan(PlannedMisses(never_delivered=1, stuck_claims=1, seed=3))
    missed = [t for t in plan if t.miss]
    assert sorted(t.miss.value for t in missed) == ["never_delivered", "retried_out"]
    assert all(not t.forced and t.run.schedule_time <= START + SPAN / 2 for t in missed)
    assert len({t.run.schedule_time for t in missed}) == 2


@pytest.mark.fast
def test_the_same_seed_loses_the_same_runs():
    def chosen(seed):
        return [(t.run.schedule_time, t.miss) for t in _plan(PlannedMisses(1, 1, seed)) if t.miss]

    assert chosen(5) == chosen(5)


@pytest.mark.fast
def test_a_run_whose_time_a_forced_run_carries_is_never_lost():
    mix = FaultMix(seed=1, forced_run=0.5)
    span = timedelta(hours=1)
    plans = [_plan(PlannedMisses(1, 1, seed), mix, span) for seed in range(20)]
    borrowed = {t.run.schedule_time for t in plans[0] if t.forced}
    assert len(borrowed) >= 5
    for plan in plans:
        assert {t.run.schedule_time for t in plan if t.miss}.isdisjoint(borrowed)


@pytest.mark.fast
def test_more_misses_than_a_job_has_early_runs_is_refused_with_the_counts_and_the_window():
    with pytest.raises(
        ValueError, match=r"cannot lose 2 never-delivered and 1 stuck runs.*01:00 and 01:04 UTC"
    ):
        _plan(PlannedMisses(never_delivered=2, stuck_claims=1))


@pytest.mark.fast
def test_negative_counts_are_refused():
    with pytest.raises(ValueError, match="stuck_claims=-1"):
        PlannedMisses(stuck_claims=-1)


@pytest.fixture(scope="module")
def lost(firestore_emulator, tmp_path_factory) -> tuple[Simulation, Result]:
    sim = Simulation(
        [TEAM],
        START,
        SPAN,
        40.0,
        FaultMix(seed=2),
        tmp_path_factory.mktemp("misses"),
        "runonce-local",
        firestore_emulator.host,
        instances_per_job=2,
        misses=PlannedMisses(never_delivered=1, stuck_claims=1, seed=2),
    )
    return sim, play(sim)


def _missed(result: Result, miss: MissedRun):
    [verdict] = [v for v in result.verdicts if v.miss is miss]
    return verdict


def _record(schedule_time: datetime) -> dict | None:
    key = scheduled_key(scheduler_job_name(TEAM.name, JOB.name), schedule_time, TEAM.project, TEAM.region)
    snapshot = firestore.Client(project="runonce-local").collection(RUNS_COLLECTION).document(key).get()
    return snapshot.to_dict() if snapshot.exists else None


def test_a_run_never_delivered_has_no_ledger_record_and_no_delivery(lost):
    _, result = lost
    verdict = _missed(result, MissedRun.NEVER_DELIVERED)
    moment = verdict.trigger.run.schedule_time
    assert _record(moment) is None
    assert [s for s in result.journal.sent() if s.schedule_time == moment and not s.forced] == []
    assert [n.schedule_time for n in result.journal.not_delivered()] == [moment]
    assert (verdict.ok, verdict.status, verdict.bodies, verdict.effects) == (True, None, 0, 0)


def test_a_stuck_claim_stays_in_progress_with_scheduler_s_attempts_used_up(lost):
    sim, result = lost
    verdict = _missed(result, MissedRun.RETRIED_OUT)
    moment = verdict.trigger.run.schedule_time
    record = _record(moment)
    assert record is not None and record["status"] == "in_progress"
    sent = [s for s in result.journal.sent() if s.schedule_time == moment and not s.forced]
    [gave_up] = [g for g in result.journal.gave_up() if g.schedule_time == moment]
    assert gave_up.attempts == len(sent) == RETRY.retry_count + 1  # every retry was spent
    assert not any(s.acknowledged for s in sent)
    # Every claim's body was killed holding it, and the last claim's lease is over: nobody holds it.
    assert record["attempts"] == verdict.bodies == sum(s.killed for s in sent) >= 1
    # The others found the claim held, or no instance while the killed ones were being replaced.
    assert {s.outcome for s in sent if not s.killed} <= {"in_progress", "no_instance"}
    assert record["lease_expires"] < sim.scheduler.clock.now()
    assert (verdict.ok, verdict.effects) == (True, 0)


def test_the_other_runs_are_judged_as_always_and_the_summary_names_the_misses(lost):
    _, result = lost
    played = [v for v in result.verdicts if v.miss is None]
    assert len(played) >= 2 and all(v.ok and v.status == "completed" and v.effects == 1 for v in played)
    assert result.ok
    [row] = result.rows
    assert (row.missed, row.effects) == (2, len(played))
    summary = "\n".join(guarantee_summary(result.verdicts))
    assert "2 runs missed on purpose" in summary
    assert "never_delivered: never delivered: no ledger record" in summary
    assert "retried_out: claim left stuck" in summary


def test_the_timeline_marks_the_two_misses(lost, tmp_path):
    _, result = lost
    drawn = lanes(result.plan, result.journal, result.bodies, result.writers)
    stuck = [lane for lane in drawn if lane.label.endswith("claim stuck")]
    never = [lane for lane in drawn if lane.label.endswith("never delivered")]
    assert [p.mark for p in never[0].points] == [Mark.NOT_DELIVERED]
    assert {Mark.KILLED, Mark.GAVE_UP, Mark.IN_PROGRESS} <= {p.mark for p in stuck[0].points}
    assert Mark.EFFECT not in {p.mark for p in stuck[0].points}
    assert save(drawn, "misses", tmp_path / "timeline.png").stat().st_size > 10_000


@pytest.mark.fast
@pytest.mark.parametrize("option", ["--never-delivered", "--stuck-claims"])
def test_the_demo_refuses_a_negative_count_before_starting_anything(option, capsys):
    assert demo_main([option, "-1"]) == 2
    assert f"{option[2:].replace('-', '_')}=-1" in capsys.readouterr().err
