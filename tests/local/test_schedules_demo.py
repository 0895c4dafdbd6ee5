"""The demo's schedules section (localscheduler.demos.schedules): one job per overlap policy whose
runs overlap on purpose, and a run missed on purpose that the watchdog's catch-up starts through
the Scheduler stand-in, on real functions-framework instances and the Firestore emulator. Each
row's verdict is ok, and the verdict is judged from the ledger, the bodies and the outbox: a
second effect, or a skipped run that ran anyway, turns the row to FAIL."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime

import pytest
from google.cloud import firestore

from localscheduler.demos.schedules import OUTBOX, SchedulesHarness, play_schedules, render
from localscheduler.picture import Mark, save
from runonce.contract import Overlap

PROJECT = "runonce-local"


@pytest.fixture(scope="module")
def played(firestore_emulator, tmp_path_factory):
    harness = SchedulesHarness(PROJECT, firestore_emulator.host, tmp_path_factory.mktemp("schedules"))
    try:
        jobs = play_schedules(harness)
    finally:
        harness.stop()
    assert not harness.pids(), "an instance is still running"
    return harness, jobs


def test_each_policy_and_the_caught_up_run_get_an_ok_row(played):
    _, jobs = played
    table = render(jobs)
    assert [(job.name, job.overlap) for job in jobs] == [
        ("allow", Overlap.ALLOW),
        ("skip", Overlap.SKIP),
        ("wait", Overlap.WAIT),
        ("catch-up", Overlap.ALLOW),
    ], table
    for job in jobs:
        assert job.ok, table
        assert job.row().endswith(" ok"), table
    assert "FAIL" not in table


def test_the_runs_overlapped_on_purpose_and_each_policy_answered_its_way(played):
    _, jobs = played
    allow, skip, wait, catch_up = jobs
    table = render(jobs)
    assert allow.overlapped and len(allow.bodies) == 2, table
    assert len(skip.skipped) == 1 and len(skip.bodies) == 1 and not skip.overlapped, table
    assert wait.waiting >= 1 and len(wait.bodies) == 2 and not wait.overlapped, table
    [missed] = [run for run in catch_up.runs if run.missed]
    assert not missed.sent and len(missed.bodies) == 1 and missed.effects == 1, table
    assert catch_up.catch_up is not None and catch_up.catch_up.first["caught_up"] == 1, table


def test_a_second_effect_of_a_run_fails_its_row(played):
    harness, _ = played
    victim = next(job for job in harness.judge() if job.name == "wait").runs[0]
    client = firestore.Client(project=PROJECT)
    document = client.collection(OUTBOX).document(victim.key + "-again")
    document.create({"run_key": victim.key})
    try:
        wait = next(job for job in harness.judge() if job.name == "wait")
        assert not wait.ok and wait.row().endswith("FAIL")
        assert any("had 2 effects" in problem for problem in wait.problems), wait.problems
        assert "FAIL" in render([wait])
    finally:
        document.delete()
    assert all(job.ok for job in harness.judge())


def test_a_skipped_run_that_ran_anyway_fails_the_skip_row(played):
    _, jobs = played
    skip = jobs[1]
    [skipped] = skip.skipped
    [body] = skip.bodies
    ran_anyway = dataclasses.replace(
        skipped, bodies=[dataclasses.replace(body, run_key=skipped.key)], effects=1
    )
    broken = dataclasses.replace(skip, runs=[ran_anyway if run is skipped else run for run in skip.runs])
    assert not broken.ok and broken.row().endswith("FAIL")
    assert any("skipped yet ran 1 bodies, 1 effects" in problem for problem in broken.problems), (
        broken.problems
    )
    assert any("ran two bodies at once" in problem for problem in broken.problems), broken.problems


def test_a_catch_up_that_did_not_run_the_missed_run_fails_its_row(played):
    _, jobs = played
    catch_up = jobs[3]
    assert catch_up.catch_up is not None
    reported = dataclasses.replace(
        catch_up.catch_up, first={**catch_up.catch_up.first, "caught_up": 0, "reported": 1}
    )
    broken = dataclasses.replace(catch_up, catch_up=reported)
    assert not broken.ok and broken.row().endswith("FAIL")


def test_the_picture_shows_each_policys_answers_and_the_caught_up_run(played, tmp_path):
    harness, _ = played
    drawn = harness.lanes()
    marks = {lane.job: set() for lane in drawn}
    for lane in drawn:
        marks[lane.job] |= {point.mark for point in lane.points}
    assert len(drawn) == 8 and list(marks) == [
        f"schedules/{job}" for job in ("allow", "skip", "wait", "catch-up")
    ]
    assert Mark.SKIPPED in marks["schedules/skip"] and Mark.WAITING in marks["schedules/wait"]
    assert not {Mark.SKIPPED, Mark.WAITING} & marks["schedules/allow"]
    [missed] = [lane for lane in drawn if Mark.NOT_DELIVERED in {point.mark for point in lane.points}]
    assert missed.job == "schedules/catch-up"
    assert {Mark.CAUGHT_UP, Mark.EFFECT} <= {point.mark for point in missed.points}
    assert save(drawn, "schedules", tmp_path / "schedules.png").stat().st_size > 10_000


def test_the_demos_scheduler_stand_in_pauses_a_job_and_says_since_when():
    """The watchdog's Scheduler in the schedules section (the Google APIs stand-in) serves what a
    watchdog that pauses calls: jobs.pause, then jobs.get reads the job as paused since then."""
    from emulator.googleapis import GoogleApisStandIn
    from localscheduler.demos.schedules import StandInScheduler

    job = "projects/p/locations/europe-west1/jobs/example-report"
    stand_in = GoogleApisStandIn().start()
    stand_in.clock = lambda: "2026-12-07T08:00:00Z"
    try:
        stand_in._store({"name": job, "state": "ENABLED", "userUpdateTime": "2026-11-01T00:00:00Z"})
        scheduler = StandInScheduler(stand_in)
        assert scheduler.paused_since(job) is None
        scheduler.pause(job)
        assert scheduler.paused_since(job) == datetime(2026, 12, 7, 8, tzinfo=UTC)
    finally:
        stand_in.stop()
