"""The verdict and the table: judged from the ledger, the job's declared effects and the body lines
the runonce core logged, the same way for any job."""

import dataclasses
from datetime import UTC, datetime, timedelta

from localscheduler.scheduler.cloud_scheduler import Trigger
from localscheduler.scheduler.journal import Journal, Sent
from localscheduler.scheduler.plan import PlannedRun
from localscheduler.verdicts.bodies import Body
from localscheduler.verdicts.scheduled import guarantee_summary, job_rows, judge, render
from runonce.contract import BodyEnd, MissedRun
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
    trigger: Trigger, start: float, end: float | None, how: BodyEnd | None, error=None, instance="i-0"
) -> Body:
    ended = _at(end) if end is not None else None
    return Body(trigger.key, f"a{start:g}", instance, _at(start), ended, how, error)


OK, RETRY, PERMANENT = BodyEnd.SUCCEEDED, BodyEnd.RETRYABLE, BodyEnd.PERMANENT


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


def _completed(last_attempt: str = "a1") -> dict:
    return _record("completed", attempt_id=last_attempt)


def test_a_completed_run_with_one_effect_is_good():
    trigger = _trigger(0)
    assert judge(trigger, _completed(), ["a1"], [_body(trigger, 1, 2, OK)], []).ok


def test_a_second_effect_of_one_run_fails_the_verdict():
    trigger = _trigger(0)
    verdict = judge(trigger, _completed(), ["a1", "a1"], [_body(trigger, 1, 2, OK)], [])
    assert verdict.problems == ("executed 2 times",)


def test_a_completed_run_without_its_effect_fails_the_verdict():
    trigger = _trigger(0)
    assert judge(trigger, _completed(), [], [_body(trigger, 1, 2, OK)], []).problems == ("executed 0 times",)


def test_a_permanently_failed_run_with_an_effect_fails_the_verdict():
    trigger = _trigger(0)
    verdict = judge(
        trigger, _record("failed"), ["a1"], [_body(trigger, 1, 2, PERMANENT, "PermanentError")], []
    )
    assert verdict.problems == ("executed 1 times",)


def test_a_run_finished_after_its_next_scheduled_time_fails_the_verdict():
    trigger = _trigger(0)
    verdict = judge(trigger, _record("completed", 2.5), ["a1"], [_body(trigger, 1, 2, OK)], [])
    assert "after its retry window" in verdict.problems[0]


def test_a_run_without_a_record_never_ran():
    assert judge(_trigger(0), None, [], [], []).problems == ("never ran: no ledger record",)


def test_a_body_rerun_after_a_kill_that_followed_the_effect_finds_it_and_is_good():
    trigger = _trigger(0)
    bodies = [_body(trigger, 1, None, None), _body(trigger, 20, 21, OK, instance="i-1")]
    verdict = judge(trigger, _completed("a20"), ["a1"], bodies, [_killed(trigger, "i-0", 2.5)])
    assert verdict.ok
    assert (verdict.bodies, verdict.found_effect) == (2, 1)


def test_a_body_rerun_after_a_kill_before_the_effect_finds_nothing():
    trigger = _trigger(0)
    bodies = [_body(trigger, 1, None, None), _body(trigger, 20, 21, OK, instance="i-1")]
    verdict = judge(trigger, _completed("a20"), ["a20"], bodies, [_killed(trigger, "i-0", 2.5)])
    assert verdict.ok
    assert verdict.found_effect == 0


def test_two_bodies_of_one_run_at_the_same_time_fail_the_verdict():
    trigger = _trigger(0)
    bodies = [_body(trigger, 1, None, None), _body(trigger, 3, 4, OK, instance="i-1")]
    verdict = judge(trigger, _completed("a3"), ["a3"], bodies, [_killed(trigger, "i-0", 5)])
    assert verdict.problems == ("bodies a1 and a3 ran at the same time",)


def test_a_body_started_again_without_a_kill_or_a_retryable_end_fails_the_verdict():
    trigger = _trigger(0)
    bodies = [_body(trigger, 1, 2, OK), _body(trigger, 3, 4, OK)]
    verdict = judge(trigger, _completed("a3"), ["a1"], bodies, [])
    assert verdict.problems == ("body started again after a1 ended succeeded",)


def test_a_body_restarted_after_a_retryable_end_is_good():
    trigger = _trigger(0)
    bodies = [_body(trigger, 1, 2, RETRY, "RuntimeError"), _body(trigger, 3, 4, OK)]
    assert judge(trigger, _completed("a3"), ["a3"], bodies, []).ok


def test_a_body_that_never_ended_on_an_instance_nobody_killed_fails_the_verdict():
    trigger = _trigger(0)
    bodies = [_body(trigger, 1, None, None), _body(trigger, 3, 4, OK)]
    verdict = judge(trigger, _completed("a3"), ["a3"], bodies, [])
    assert "body a1 never ended and its instance was not killed" in verdict.problems


def test_a_run_finished_by_another_attempt_than_its_last_body_fails_the_verdict():
    trigger = _trigger(0)
    verdict = judge(trigger, _completed("a0"), ["a1"], [_body(trigger, 1, 2, OK)], [])
    assert verdict.problems == ("finished by attempt a0, not by its last body's",)


def test_an_effect_written_by_no_body_of_the_run_fails_the_verdict():
    trigger = _trigger(0)
    verdict = judge(trigger, _completed(), ["a9"], [_body(trigger, 1, 2, OK)], [])
    assert verdict.problems == ("effect written by attempt a9, which started no body of this run",)


def test_a_completed_run_whose_last_body_did_not_succeed_fails_the_verdict():
    trigger = _trigger(0)
    verdict = judge(trigger, _completed(), ["a1"], [_body(trigger, 1, 2, RETRY, "RuntimeError")], [])
    assert verdict.problems == ("completed, but its last body ended retryable",)


def test_a_failed_run_whose_last_body_did_not_fail_permanently_fails_the_verdict():
    trigger = _trigger(0)
    verdict = judge(trigger, _record("failed"), [], [_body(trigger, 1, 2, OK)], [])
    assert verdict.problems == ("failed, but its last body ended succeeded",)


def test_a_job_without_declared_effects_is_judged_on_the_ledger_and_its_bodies():
    trigger = _trigger(0)
    good = judge(trigger, _completed(), None, [_body(trigger, 1, 2, OK)], [])
    assert (good.ok, good.effects) == (True, None)
    overlapping = [_body(trigger, 1, None, None), _body(trigger, 3, 4, OK, instance="i-1")]
    bad = judge(trigger, _completed("a3"), None, overlapping, [_killed(trigger, "i-0", 5)])
    assert bad.problems == ("bodies a1 and a3 ran at the same time",)


def test_effects_whose_writer_is_not_recorded_are_counted_without_attribution():
    trigger = _trigger(0)
    assert judge(trigger, _completed(), [None], [_body(trigger, 1, 2, OK)], []).ok
    assert judge(trigger, _completed(), [None, None], [_body(trigger, 1, 2, OK)], []).problems == (
        "executed 2 times",
    )


def test_the_table_counts_bodies_effects_and_permanent_failures():
    done, failed, forced = _trigger(0), _trigger(2), _trigger(4, forced=True)
    records = {
        done.key: _record("completed", attempt_id="a3"),
        failed.key: _record("failed", 2.5, "a121"),
        forced.key: _record("completed", 4.5, "a241"),
    }
    writers = {done.key: ["a3"], failed.key: [], forced.key: ["a241"]}
    bodies = {
        done.key: [_body(done, 1, 2, RETRY, "RuntimeError"), _body(done, 3, 4, OK)],
        failed.key: [_body(failed, 121, 122, PERMANENT, "PermanentError")],
        forced.key: [_body(forced, 241, 242, OK)],
    }
    verdicts = [
        judge(trigger, records[trigger.key], writers[trigger.key], bodies[trigger.key], [])
        for trigger in (done, failed, forced)
    ]
    [row] = job_rows(verdicts, Journal())
    assert (row.scheduled, row.forced, row.bodies, row.effects, row.permanent_failures) == (2, 1, 4, 2, 1)
    assert row.verdict == "ok"


def test_the_table_says_when_a_job_s_effects_were_not_observed():
    trigger = _trigger(0)
    verdict = judge(trigger, _completed(), None, [_body(trigger, 1, 2, OK)], [])
    rows = job_rows([verdict], Journal())
    assert rows[0].unobserved == 1
    assert "n/a" in render(rows).splitlines()[2]
    assert "effects not observed for demo/sync" in guarantee_summary([verdict])[-1]


def _planned(minute: int, miss: MissedRun) -> Trigger:
    return dataclasses.replace(_trigger(minute), miss=miss)


def _stuck_record(claims: int) -> dict:
    return {"status": "in_progress", "attempt_id": "a20", "attempts": claims, "expire_at": T0}


def _stuck_bodies(trigger: Trigger) -> tuple[list[Body], list[Sent]]:
    bodies = [_body(trigger, 1, None, None), _body(trigger, 20, None, None, instance="i-1")]
    return bodies, [_killed(trigger, "i-0", 2), _killed(trigger, "i-1", 21)]


def test_a_run_never_delivered_as_planned_is_an_expected_miss():
    verdict = judge(_planned(0, MissedRun.NEVER_DELIVERED), None, [], [], [])
    assert (verdict.ok, verdict.miss) == (True, MissedRun.NEVER_DELIVERED)


def test_a_run_planned_never_delivered_that_has_a_record_or_an_effect_fails_the_verdict():
    trigger = _planned(0, MissedRun.NEVER_DELIVERED)
    verdict = judge(trigger, _completed(), ["a1"], [_body(trigger, 1, 2, OK)], [])
    assert verdict.problems == (
        "executed 1 times",
        "planned never delivered, yet it has a ledger record",
        "planned never delivered, yet 1 bodies started",
    )


def test_a_claim_left_held_by_killed_bodies_as_planned_is_an_expected_miss():
    trigger = _planned(0, MissedRun.RETRIED_OUT)
    bodies, sent = _stuck_bodies(trigger)
    verdict = judge(trigger, _stuck_record(2), [], bodies, sent)
    assert (verdict.ok, verdict.status, verdict.bodies) == (True, "in_progress", 2)


def test_a_run_planned_to_stay_held_that_finished_fails_the_verdict():
    trigger = _planned(0, MissedRun.RETRIED_OUT)
    bodies = [_body(trigger, 1, 2, OK)]
    verdict = judge(trigger, _completed(), ["a1"], bodies, [])
    assert verdict.problems == (
        "executed 1 times",
        "planned to stay held, yet completed",
        "body a1 ended succeeded, though every body was to die holding the claim",
    )


def test_a_stuck_claim_whose_body_was_not_killed_or_whose_2xx_reached_scheduler_fails_the_verdict():
    trigger = _planned(0, MissedRun.RETRIED_OUT)
    bodies, sent = _stuck_bodies(trigger)
    acknowledged = dataclasses.replace(sent[1], killed=False, status=200, acknowledged=True, attempt=2)
    verdict = judge(trigger, _stuck_record(2), [], bodies, [sent[0], acknowledged])
    assert verdict.problems == (
        "Scheduler saw a 2xx for attempt 2: its retries did not run out",
        "body a20 never ended and its instance was not killed",
    )


def test_a_stuck_claim_needs_one_claim_per_body_and_a_record():
    trigger = _planned(0, MissedRun.RETRIED_OUT)
    bodies, sent = _stuck_bodies(trigger)
    assert judge(trigger, _stuck_record(3), [], bodies, sent).problems == (
        "3 claims on the record, 2 bodies started",
    )
    assert judge(trigger, None, [], [], []).problems == ("planned to stay held, yet it has no ledger record",)


def test_the_table_counts_the_misses_and_the_summary_names_them_apart_from_the_guarantee():
    done, never, stuck = (
        _trigger(0),
        _planned(2, MissedRun.NEVER_DELIVERED),
        _planned(4, MissedRun.RETRIED_OUT),
    )
    bodies, sent = _stuck_bodies(stuck)
    verdicts = [
        judge(done, _completed(), ["a1"], [_body(done, 1, 2, OK)], []),
        judge(never, None, [], [], []),
        judge(stuck, _stuck_record(2), [], bodies, sent),
    ]
    [row] = job_rows(verdicts, Journal())
    assert (row.scheduled, row.effects, row.missed, row.verdict) == (3, 1, 2, "ok")
    summary = guarantee_summary(verdicts)
    assert "(1 effects + 0 failed = 1 runs)" in summary[0]
    assert summary[-3:] == [
        "2 runs missed on purpose, each as planned (expected misses, not failures):",
        "  demo/sync 2026-03-29 01:02Z never_delivered: never delivered: no ledger record",
        "  demo/sync 2026-03-29 01:04Z retried_out: claim left stuck: in_progress after Scheduler's retries "
        "ran out, 2 claims, every body killed holding it",
    ]
