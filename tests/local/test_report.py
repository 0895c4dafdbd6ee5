"""The verdict and the table: judged from what the store holds, one outcome per run."""

from collections import Counter
from datetime import UTC, datetime, timedelta

from localscheduler.journal import Journal
from localscheduler.plan import PlannedRun
from localscheduler.report import job_rows, judge
from localscheduler.scheduler import Trigger
from localscheduler.store import StoreView
from stacks.team import Job, Team

T0 = datetime(2026, 3, 29, 1, 0, tzinfo=UTC)
JOB = Job(name="sync", schedule="*/2 * * * *", source="report")
TEAM = Team(name="demo", project="runonce-demo", region="europe-west1", jobs=[JOB])


def _trigger(minute: int, forced: bool = False) -> Trigger:
    run = PlannedRun(TEAM, JOB, T0 + timedelta(minutes=minute), T0 + timedelta(minutes=minute + 2))
    return Trigger(run, forced, run.schedule_time, run.next_time)


def _record(status: str, finished_minute: float = 0.5) -> dict:
    return {
        "status": status,
        "finished_at": T0 + timedelta(minutes=finished_minute),
        "expire_at": T0,
        "attempts": 1,
    }


def test_a_completed_run_with_one_effect_is_good():
    trigger = _trigger(0)
    assert judge(trigger, StoreView({trigger.key: _record("completed")}, Counter({trigger.key: 1}))).ok


def test_a_second_effect_of_one_run_fails_the_verdict():
    trigger = _trigger(0)
    verdict = judge(trigger, StoreView({trigger.key: _record("completed")}, Counter({trigger.key: 2})))
    assert verdict.problems == ("executed 2 times",)


def test_a_run_finished_after_its_next_scheduled_time_fails_the_verdict():
    trigger = _trigger(0)
    verdict = judge(trigger, StoreView({trigger.key: _record("completed", 2.5)}, Counter({trigger.key: 1})))
    assert "after its retry window" in verdict.problems[0]


def test_a_run_without_a_record_never_ran():
    assert judge(_trigger(0), StoreView({}, Counter())).problems == ("never ran: no ledger record",)


def test_executions_count_effects_and_permanent_failures_once_each():
    done, failed, forced = _trigger(0), _trigger(2), _trigger(4, forced=True)
    view = StoreView(
        {
            done.key: _record("completed"),
            failed.key: _record("failed", 2.5),
            forced.key: _record("completed", 4.5),
        },
        Counter({done.key: 1, forced.key: 1}),
    )
    [row] = job_rows([judge(trigger, view) for trigger in (done, failed, forced)], Journal())
    assert (row.scheduled, row.forced, row.executions, row.permanent_failures) == (2, 1, 3, 1)
    assert row.verdict == "ok"
