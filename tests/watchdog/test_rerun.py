"""The watchdog and an operator's actions on a missed run: a re-run in progress is no missed run,
and a run missed again after an operator acted (its re-run died) is reported again, once.

Each sequence is the real one on both stores (the Firestore emulator and the in-memory store):
the re-run is requested by `runonce rerun`'s own code (`operate.rerun.request_rerun`), dispatched
as Scheduler's forced delivery is taken by the library (`Store.take_rerun`, which reopens the run),
and the watchdog's ticks are `check` on the team's ledger and its own store.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

from operate.rerun import Target, request_rerun
from runonce.contract import MissedRun
from runonce.core.store import Claim, Rerun, StoredResult
from runonce.scheduler.expected import forced_key, next_time, scheduled_key
from runonce.scheduler.watchdog import Watch, check
from tests.watchdog.conftest import LEDGER_LEASE, watchdog_lines
from tests.watchdog.test_check import LOCATION, PROJECT, SYNC, TEAM, at

DAILY = replace(
    SYNC, job="daily", scheduler_job="orders-daily", schedule="10 0 * * *", lookback=timedelta(days=3)
)
TARGET = Target(TEAM, DAILY.job, DAILY.scheduler_job, PROJECT, LOCATION, DAILY.schedule, DAILY.time_zone)
RUN = datetime(2026, 11, 29, 0, 10, tzinfo=UTC)
"""The one run of the daily job the tests look at."""
KEY = scheduled_key(DAILY.scheduler_job, RUN, PROJECT, LOCATION)


def tick(stores, clock, when: datetime, capsys) -> list[dict]:
    """One watchdog tick at `when`: the lines it wrote."""
    clock.current = when
    check(Watch(TEAM, PROJECT, LOCATION, (DAILY,)), stores.ledger, stores.claims)
    return watchdog_lines(capsys.readouterr().out)


def claimed(stores, clock, when: datetime) -> Claim:
    """The scheduled delivery of the run claims it at `when`."""
    clock.current = when
    claim = stores.ledger.claim(KEY, {"job": DAILY.scheduler_job, "schedule_time": "2026-11-29T00:10:00Z"})
    assert isinstance(claim, Claim), claim
    return claim


def rerun(stores, clock, when: datetime, insist: bool = False) -> Rerun:
    """`runonce rerun --time 2026-11-29T00:10:00Z` at `when`; the forced delivery Scheduler sends
    for it takes the request and reopens the run (its attempt then holds the run)."""
    clock.current = when
    taken: list[Rerun | None] = []

    def dispatch(target: Target) -> None:
        upcoming = next_time(target.schedule, target.time_zone, clock.current)
        forced = forced_key(target.scheduler_job, upcoming, target.project, target.location)
        fields = {"job": target.scheduler_job, "schedule_time": upcoming.isoformat(), "forced": True}
        taken.append(stores.ledger.take_rerun(target.slot, forced, fields))

    request_rerun(stores.ledger, TARGET, RUN, "oncall@example.com", insist, dispatch)
    [taken_rerun] = taken
    assert taken_rerun is not None and taken_rerun.claim is not None
    return taken_rerun


def test_a_failed_run_re_run_by_an_operator_is_not_missed_while_its_re_run_runs(stores, clock, capsys):
    assert stores.ledger.fail(claimed(stores, clock, at(10)), "the export was empty")
    assert tick(stores, clock, at(35), capsys) == []  # failed: finished, the library reported it
    rerun(stores, clock, at(40))
    # The re-run's attempt holds the run (lease 6 min), long past the run's own grace.
    assert tick(stores, clock, at(42), capsys) == []
    assert tick(stores, clock, at(45), capsys) == []


def test_a_re_run_holding_an_unknown_outcome_is_not_missed_while_its_lease_is_live(stores, clock, capsys):
    assert stores.ledger.fail(claimed(stores, clock, at(10)), "the export was empty")
    held = rerun(stores, clock, at(40)).claim
    assert held is not None and stores.ledger.hold(held, 3600, "outcome unknown")
    assert tick(stores, clock, at(90), capsys) == []  # held until 01:40
    [line] = tick(stores, clock, at(105), capsys)
    assert line["missed_run"] == MissedRun.RETRIED_OUT.value


def test_a_re_run_whose_attempt_died_is_reported_again_once(stores, clock, capsys):
    claimed(stores, clock, at(10))  # the scheduled attempt dies; Scheduler's retries run out
    [first] = tick(stores, clock, at(35), capsys)
    assert (first["missed_run"], first["run_key"]) == (MissedRun.RETRIED_OUT.value, KEY)
    rerun(stores, clock, at(40))  # the runbook: rerun; its attempt claims the run, then dies
    assert tick(stores, clock, at(42), capsys) == []  # alive
    assert at(40) + LEDGER_LEASE < at(50)
    # Lease ended, but a retry of the forced delivery may still take it over within the grace.
    assert tick(stores, clock, at(50), capsys) == []
    [again] = tick(stores, clock, at(65), capsys)
    assert (again["missed_run"], again["run_key"]) == (MissedRun.RETRIED_OUT.value, KEY)
    assert again["command"] == first["command"]
    assert tick(stores, clock, at(75), capsys) == []
    assert tick(stores, clock, at(200), capsys) == []


def test_each_re_run_that_dies_is_reported_once_and_one_that_finishes_is_not(stores, clock, capsys):
    day = 24 * 60  # one re-run per interval of the job: the next one after its next scheduled run

    def about(lines: list[dict]) -> list[str]:
        return [line["missed_run"] for line in lines if line["run_key"] == KEY]

    claimed(stores, clock, at(10))
    assert about(tick(stores, clock, at(35), capsys)) == [MissedRun.RETRIED_OUT.value]
    rerun(stores, clock, at(40))
    assert about(tick(stores, clock, at(65), capsys)) == [MissedRun.RETRIED_OUT.value]  # it died
    rerun(stores, clock, at(day + 20))
    assert about(tick(stores, clock, at(day + 45), capsys)) == [MissedRun.RETRIED_OUT.value]  # so did this
    assert about(tick(stores, clock, at(day + 55), capsys)) == []
    third = rerun(stores, clock, at(2 * day + 20)).claim
    assert third is not None
    clock.current = at(2 * day + 21)
    assert stores.ledger.complete(third, StoredResult.of({"rows": 3})) is not None
    assert about(tick(stores, clock, at(2 * day + 50), capsys)) == []


def test_a_retry_of_the_re_runs_delivery_that_takes_it_over_and_finishes_is_not_reported(
    stores, clock, capsys
):
    claimed(stores, clock, at(10))
    assert len(tick(stores, clock, at(35), capsys)) == 1
    rerun(stores, clock, at(40))  # its attempt dies; Scheduler retries the forced delivery
    retry = claimed(stores, clock, at(40) + LEDGER_LEASE + timedelta(minutes=1))
    assert tick(stores, clock, at(50), capsys) == []
    clock.current = at(51)
    assert stores.ledger.complete(retry, StoredResult.of(1)) is not None
    assert tick(stores, clock, at(65), capsys) == []


def test_a_run_still_missed_after_an_operator_released_it_is_reported_again_once(stores, clock, capsys):
    attempt = claimed(stores, clock, at(10))
    [first] = tick(stores, clock, at(35), capsys)
    action = {"action": "release", "by": "oncall@example.com", "at": at(36), "detail": {}}
    clock.current = at(36)
    assert isinstance(stores.ledger.release_held(KEY, attempt.attempt_id, action, False), dict)
    # A release brings no delivery: Scheduler's retries are over, so the run stays missed.
    [again] = tick(stores, clock, at(45), capsys)
    assert (first["missed_run"], again["missed_run"]) == (MissedRun.RETRIED_OUT.value,) * 2
    assert tick(stores, clock, at(55), capsys) == []


def test_runs_no_operator_touched_keep_one_report_whatever_their_state(stores, clock, capsys):
    held = claimed(stores, clock, at(10))
    assert stores.ledger.hold(held, 3600, "outcome unknown")
    [line] = tick(stores, clock, at(35), capsys)
    assert line["missed_run"] == MissedRun.STILL_HELD.value
    assert tick(stores, clock, at(75), capsys) == []  # its lease ended: retried_out, not reported twice
