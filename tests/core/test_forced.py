"""Defect class 2: forced or scheduled must not depend on when a delivery arrives.

Scheduler's "Force run" sends the next scheduled time T, exactly the headers of the scheduled
run at T, and stops retrying a run at the job's next scheduled time: a forced run's deliveries are
sent before T, the scheduled run's at or after T. Only arrival time tells them apart, against a
clock that may be off. The rule: a delivery is forced when T lies more than `forced_skew` ahead
of the clock and the scheduled run at T has no record yet; anything else is the scheduled run.
These tests move the clock to play a slow instance, a retry crossing the threshold, and check
that no run's job body ever runs twice."""

from __future__ import annotations

from collections import Counter

import pytest

from emulator.wire import Fault
from tests.conftest import SCHEDULED

from .conftest import scheduler_headers

T = "2026-11-29T04:00:00Z"  # the next scheduled time after SCHEDULED (hourly job)


def _set(clock, seconds_after_scheduled: float) -> None:
    clock.current = SCHEDULED
    clock.advance(seconds_after_scheduled)


def _no_key_ran_twice(probe) -> None:
    counts = Counter(run.key for run in probe.runs)
    assert all(count == 1 for count in counts.values()), counts


@pytest.mark.both_stores
def test_retry_of_a_scheduled_run_seen_by_a_slow_clock_is_a_duplicate_not_a_forced_run(client, probe, clock):
    _set(clock, 5)
    first = client.post("/", headers=scheduler_headers())  # the scheduled run at 03:00, done
    # Its 2xx is lost; the retry reaches an instance whose clock is two minutes behind.
    _set(clock, -120)
    retry = client.post("/", headers=scheduler_headers())
    assert first.json["outcome"] == "completed"
    assert retry.status_code == 200 and retry.json["outcome"] == "duplicate"
    assert retry.json["run_key"] == first.json["run_key"]
    assert probe.count == 1


def test_scheduled_run_in_progress_seen_by_a_slow_clock_is_answered_in_progress(client, probe, clock, ledger):
    from .conftest import key_of

    _set(clock, 5)
    ledger.claim(key_of(clock), {"job": "nightly-report"})  # an attempt is running it
    _set(clock, -90)
    response = client.post("/", headers=scheduler_headers())
    assert response.status_code == 409 and response.json["outcome"] == "in_progress"
    assert probe.count == 0


@pytest.mark.both_stores
def test_forced_run_well_before_its_time_is_a_run_of_its_own(client, probe, clock):
    _set(clock, 300)  # 03:05: "Force run" sends the next scheduled time, 04:00
    forced = client.post("/", headers=scheduler_headers(time=T))
    _set(clock, 3605)  # 04:00:05, the scheduled run
    scheduled = client.post("/", headers=scheduler_headers(time=T))
    assert (forced.json["outcome"], scheduled.json["outcome"]) == ("completed", "completed")
    assert [run.forced for run in probe.runs] == [True, False]
    _no_key_ran_twice(probe)


@pytest.mark.both_stores
def test_forced_run_retried_across_the_threshold_becomes_the_scheduled_run_never_a_second_one(
    client, probe, clock
):
    _set(clock, 300)
    forced = client.post("/", headers=scheduler_headers(time=T))  # ran; its 2xx was lost
    _set(clock, 3600 - 30)  # its retry comes 30 s before 04:00, inside the skew allowance
    retry = client.post("/", headers=scheduler_headers(time=T))
    _set(clock, 3605)
    scheduled = client.post("/", headers=scheduler_headers(time=T))
    assert forced.json["outcome"] == "completed"
    # The limit: the retry cannot be told from the scheduled run, so it is the scheduled run
    # (run once, 30 s early) and the real scheduled delivery is its duplicate.
    assert retry.json["outcome"] == "completed" and retry.json["run_key"] != forced.json["run_key"]
    assert scheduled.json["outcome"] == "duplicate" and scheduled.json["run_key"] == retry.json["run_key"]
    assert [run.forced for run in probe.runs] == [True, False]
    _no_key_ran_twice(probe)


@pytest.mark.both_stores
def test_forced_run_retried_after_the_scheduled_run_finished_is_its_duplicate(client, probe, clock):
    _set(clock, 300)
    probe.behaviour = lambda request: 1 / 0
    failed = client.post("/", headers=scheduler_headers(time=T))  # the forced run fails, released
    probe.behaviour = lambda request: "ok"
    _set(clock, 3605)
    scheduled = client.post("/", headers=scheduler_headers(time=T))
    _set(clock, 3700)  # the forced run's retry, had Scheduler sent one this late
    retry = client.post("/", headers=scheduler_headers(time=T))
    assert failed.json["outcome"] == "retry"
    assert scheduled.json["outcome"] == "completed"
    assert retry.json["outcome"] == "duplicate" and retry.json["run_key"] == scheduled.json["run_key"]
    assert probe.count == 2  # the failed forced attempt and the scheduled run, nothing more


@pytest.mark.both_stores
def test_the_limit_a_clock_more_than_the_skew_behind_takes_a_first_scheduled_delivery_for_forced(
    client, probe, clock
):
    _set(clock, 300)
    forced = client.post("/", headers=scheduler_headers(time=T))
    # The scheduled run of 04:00 first reaches an instance whose clock says 03:58: it has no record
    # yet, so nothing tells it from a retry of the forced run, whose duplicate it is then answered.
    _set(clock, 3600 - 120)
    early = client.post("/", headers=scheduler_headers(time=T))
    assert forced.json["outcome"] == "completed" and early.json["outcome"] == "duplicate"
    assert early.json["run_key"] == forced.json["run_key"]
    assert probe.count == 1


def test_a_forced_run_costs_two_more_round_trips_and_a_scheduled_run_still_two(client, clock, tap):
    tap.reset()
    client.post("/", headers=scheduler_headers())
    assert tap.total() == 2
    _set(clock, 300)
    tap.reset()
    client.post("/", headers=scheduler_headers(time=T))
    # The look for a record of the scheduled run, the look for a re-run request (docs/rerun.md),
    # the claim, the completion.
    assert tap.total() == 4


def test_store_down_while_checking_a_forced_run_answers_store_unavailable(client, probe, clock, tap):
    _set(clock, 300)
    tap.inject(Fault("BatchGetDocuments", times=100))
    response = client.post("/", headers=scheduler_headers(time=T))
    assert response.status_code == 500
    assert response.json["outcome"] == "store_unavailable"
    assert probe.count == 0
