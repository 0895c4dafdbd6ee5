"""The verdict and the table: judged from what the store holds and what the job bodies logged."""

from collections import Counter
from datetime import UTC, datetime, timedelta

from localscheduler.bodies import Body
from localscheduler.journal import Journal, Sent
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


def _record(status: str, finished_minute: float = 0.5, attempt_id: str = "a1") -> dict:
    return {
        "status": status,
        "attempt_id": attempt_id,
        "finished_at": T0 + timedelta(minutes=finished_minute),
        "expire_at": T0,
        "attempts": 1,
    }


def _at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


def _body(
    trigger: Trigger, start: float, end: float | None, outcome: str | None, error=None, instance="i-0"
) -> Body:
    ended = _at(end) if end is not None else None
    return Body(trigger.key, f"a{start:g}", instance, _at(start), ended, outcome, error)


def _killed(trigger: Trigger, instance: str, answered: float) -> Sent:
    return Sent(
        team=TEAM.name,
        job=JOB.name,
        schedule_time=trigger.run.schedule_time,
        forced=trigger.forced,
        attempt=1,
        copy=False,
        fault="killed_after_effect",
        sent_at=_at(0),
        instance=instance,
        status=None,
        outcome="connection",
        acknowledged=False,
        killed=True,
        answered_at=_at(answered),
    )


def _completed(trigger: Trigger, last_attempt: str = "a1", effects: int = 1) -> StoreView:
    record = _record("completed", attempt_id=last_attempt)
    return StoreView({trigger.key: record}, Counter({trigger.key: effects}))


def test_a_completed_run_with_one_effect_is_good():
    trigger = _trigger(0)
    assert judge(trigger, _completed(trigger), [_body(trigger, 1, 2, "published")], []).ok


def test_a_second_effect_of_one_run_fails_the_verdict():
    trigger = _trigger(0)
    bodies = [_body(trigger, 1, 2, "published")]
    verdict = judge(trigger, _completed(trigger, effects=2), bodies, [])
    assert verdict.problems[0] == "executed 2 times"


def test_a_run_finished_after_its_next_scheduled_time_fails_the_verdict():
    trigger = _trigger(0)
    view = StoreView({trigger.key: _record("completed", 2.5)}, Counter({trigger.key: 1}))
    verdict = judge(trigger, view, [_body(trigger, 1, 2, "published")], [])
    assert "after its retry window" in verdict.problems[0]


def test_a_run_without_a_record_never_ran():
    assert judge(_trigger(0), StoreView({}, Counter()), [], []).problems == ("never ran: no ledger record",)


def test_a_body_rerun_after_a_kill_that_followed_the_effect_finds_it_and_is_good():
    trigger = _trigger(0)
    bodies = [_body(trigger, 1, 2, "published"), _body(trigger, 20, 21, "already published", instance="i-1")]
    verdict = judge(trigger, _completed(trigger, "a20"), bodies, [_killed(trigger, "i-0", 2.5)])
    assert verdict.ok
    assert (verdict.bodies, verdict.found_published) == (2, 1)


def test_two_bodies_of_one_run_at_the_same_time_fail_the_verdict():
    trigger = _trigger(0)
    bodies = [_body(trigger, 1, None, None), _body(trigger, 3, 4, "published", instance="i-1")]
    verdict = judge(trigger, _completed(trigger, "a3"), bodies, [_killed(trigger, "i-0", 5)])
    assert verdict.problems == ("bodies a1 and a3 ran at the same time",)


def test_a_body_started_again_without_a_kill_or_a_retryable_error_fails_the_verdict():
    trigger = _trigger(0)
    bodies = [_body(trigger, 1, 2, "published"), _body(trigger, 3, 4, "already published")]
    verdict = judge(trigger, _completed(trigger, "a3"), bodies, [])
    assert verdict.problems == ("body started again after a1 ended published",)


def test_a_body_restarted_after_a_retryable_error_is_good():
    trigger = _trigger(0)
    bodies = [_body(trigger, 1, 2, "raised", "RuntimeError"), _body(trigger, 3, 4, "published")]
    assert judge(trigger, _completed(trigger, "a3"), bodies, []).ok


def test_a_body_that_never_ended_on_an_instance_nobody_killed_fails_the_verdict():
    trigger = _trigger(0)
    bodies = [_body(trigger, 1, None, None), _body(trigger, 3, 4, "published")]
    verdict = judge(trigger, _completed(trigger, "a3"), bodies, [])
    assert "body a1 never ended and its instance was not killed" in verdict.problems


def test_a_run_finished_by_another_attempt_than_its_last_body_fails_the_verdict():
    trigger = _trigger(0)
    verdict = judge(trigger, _completed(trigger, "a0"), [_body(trigger, 1, 2, "published")], [])
    assert verdict.problems == ("finished by attempt a0, not by its last body's",)


def test_effects_the_bodies_logged_must_match_the_outbox():
    trigger = _trigger(0)
    verdict = judge(trigger, _completed(trigger), [_body(trigger, 1, 2, "already published")], [])
    assert "bodies logged 0 effects, the outbox holds 1" in verdict.problems
    assert "body a1 found an effect no earlier body wrote" in verdict.problems


def test_the_table_counts_bodies_effects_and_permanent_failures():
    done, failed, forced = _trigger(0), _trigger(2), _trigger(4, forced=True)
    view = StoreView(
        {
            done.key: _record("completed", attempt_id="a3"),
            failed.key: _record("failed", 2.5, "a121"),
            forced.key: _record("completed", 4.5, "a241"),
        },
        Counter({done.key: 1, forced.key: 1}),
    )
    bodies = {
        done.key: [_body(done, 1, 2, "raised", "RuntimeError"), _body(done, 3, 4, "published")],
        failed.key: [_body(failed, 121, 122, "raised", "PermanentError")],
        forced.key: [_body(forced, 241, 242, "published")],
    }
    verdicts = [judge(trigger, view, bodies[trigger.key], []) for trigger in (done, failed, forced)]
    [row] = job_rows(verdicts, Journal())
    assert (row.scheduled, row.forced, row.bodies, row.effects, row.permanent_failures) == (2, 1, 4, 2, 1)
    assert row.verdict == "ok"
