"""The demo's schedules section (localscheduler.demos.schedules): one job per overlap policy whose
runs overlap on purpose, and a run missed on purpose that the watchdog's catch-up starts through
the Scheduler stand-in, on real functions-framework instances and the Firestore emulator. Each
row's verdict is ok, and the verdict is judged from the ledger, the bodies and the outbox: a
second effect, or a skipped run that ran anyway, turns the row to FAIL."""

from __future__ import annotations

import contextlib
import dataclasses
import json
from collections.abc import Iterator
from datetime import UTC, datetime

import pytest
from google.cloud import firestore

from localscheduler.demos.schedules import (
    CALENDAR_JOB,
    OUTBOX,
    RESUME_WHY,
    RESUMER,
    SYNC_OUTBOX,
    SchedulesHarness,
    SchedulesSeen,
    feature_row,
    play_schedules,
    render,
)
from localscheduler.picture import Mark, save
from runonce.contract import Overlap

PROJECT = "runonce-local"


@pytest.fixture(scope="module")
def played(firestore_emulator, tmp_path_factory):
    harness = SchedulesHarness(PROJECT, firestore_emulator.host, tmp_path_factory.mktemp("schedules"))
    try:
        seen = play_schedules(harness)
    finally:
        harness.stop()
    assert not harness.pids(), "an instance is still running"
    return harness, seen


@contextlib.contextmanager
def added(harness, collection: str, name: str, fields: dict) -> Iterator[None]:
    """A document added to the emulator for the block; the section judges ok again after it."""
    document = firestore.Client(project=PROJECT).collection(collection).document(name)
    document.create(fields)
    try:
        yield
    finally:
        document.delete()
    assert harness.judge().ok


def test_each_policy_and_the_caught_up_run_get_an_ok_row(played):
    _, seen = played
    jobs = seen.jobs
    table = render(seen)
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
    _, seen = played
    allow, skip, wait, catch_up = seen.jobs
    table = render(seen)
    assert allow.overlapped and len(allow.bodies) == 2, table
    assert len(skip.skipped) == 1 and len(skip.bodies) == 1 and not skip.overlapped, table
    assert wait.waiting >= 1 and len(wait.bodies) == 2 and not wait.overlapped, table
    [missed] = [run for run in catch_up.runs if run.missed]
    assert not missed.sent and len(missed.bodies) == 1 and missed.effects == 1, table
    assert catch_up.catch_up is not None and catch_up.catch_up.first["caught_up"] == 1, table


def test_a_second_effect_of_a_run_fails_its_row(played):
    harness, _ = played
    victim = next(job for job in harness.judge().jobs if job.name == "wait").runs[0]
    with added(harness, OUTBOX, victim.key + "-again", {"run_key": victim.key}):
        wait = next(job for job in harness.judge().jobs if job.name == "wait")
        assert not wait.ok and wait.row().endswith("FAIL")
        assert any("had 2 effects" in problem for problem in wait.problems), wait.problems
        assert "FAIL" in render(SchedulesSeen([wait], []))


def test_a_skipped_run_that_ran_anyway_fails_the_skip_row(played):
    _, seen = played
    skip = seen.jobs[1]
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
    _, seen = played
    catch_up = seen.jobs[3]
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
    assert len(drawn) == 2 * 4 + 4 + 2 + 2 and list(marks) == [
        f"schedules/{job}" for job in ("allow", "skip", "wait", "catch-up", "sync", "failing", "holiday")
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


def test_the_previous_pause_and_calendar_rows_are_ok_and_say_what_happened(played):
    _, seen = played
    table = render(seen)
    assert [feature.name for feature in seen.features] == ["previous", "pause", "calendar"], table
    previous, pause, calendar = seen.features
    for feature in seen.features:
        assert feature.ok, table
        assert feature_row(feature).endswith(" ok"), table
    # The sync job's four windows chained under a lost answer, a kill after the effect and a kill
    # mid-run: the killed runs were taken over and each window copied once.
    assert len(previous.windows()) == 4 and len(previous.copies) == 4, table
    assert previous.lost == 1 and previous.killed >= 1, table
    # Not paused by the tick after the 1st failed run; paused once by the two ticks after the 2nd.
    first, *second = pause.ticks
    assert (first.failed_before, first.counts["paused"]) == (1, 0), pause.ticks
    assert [tick.counts["paused"] for tick in second] in ([0, 1], [1, 0]), pause.ticks
    assert pause.pauses == 1 and pause.state == "ENABLED", table
    assert pause.resumed["by"] == RESUMER and pause.resumed["why"] == RESUME_WHY, pause.resumed
    assert len(calendar.runs) == 2 and calendar.tick["missed"] == 0, table


def test_a_second_copy_of_a_window_fails_the_previous_row(played):
    harness, _ = played
    # What a run would write that read a previous older than the run before it.
    overlapping = {"since": "2026-01-01T00:01:00Z", "until": "2026-01-01T00:03:00Z", "run_key": "another"}
    with added(harness, SYNC_OUTBOX, "overlapping", overlapping):
        previous = harness.judge().features[0]
        assert not previous.ok and feature_row(previous).endswith("FAIL")
        assert any("[00:01:00Z, 00:03:00Z) was copied, but no completed run" in p for p in previous.problems)
        assert "FAIL" in render(SchedulesSeen([], [previous]))


def _with_result(previous, index: int, **result):
    run = previous.runs[index]
    record = {**run.record, "result_json": json.dumps({**run.result, **result})}
    runs = [dataclasses.replace(r, record=record) if r is run else r for r in previous.runs]
    return dataclasses.replace(previous, runs=runs)


def test_a_gap_or_an_overlap_between_windows_fails_the_previous_row(played):
    _, seen = played
    previous = seen.features[0]
    gap = _with_result(previous, 2, since="2026-01-01T00:02:10Z")
    assert any("starts at 00:02:10Z: a gap after 00:02:00Z" in p for p in gap.problems), gap.problems
    overlap = _with_result(previous, 2, since="2026-01-01T00:01:00Z")
    assert any("starts at 00:01:00Z: it overlaps" in p for p in overlap.problems), overlap.problems
    assert not gap.ok and not overlap.ok


def test_runs_the_faults_did_not_hit_fail_the_previous_row(played):
    _, seen = played
    previous = seen.features[0]
    clean = [
        dataclasses.replace(run, sent=[dataclasses.replace(s, fault="none", killed=False) for s in run.sent])
        for run in previous.runs
    ]
    spared = dataclasses.replace(previous, runs=clean)
    assert any("not tested under a lost answer and a kill" in p for p in spared.problems), spared.problems


def test_a_pause_after_the_first_failed_run_or_a_second_pause_fails_the_pause_row(played):
    _, seen = played
    pause = seen.features[1]
    first, *rest = pause.ticks
    early = dataclasses.replace(pause, ticks=[dataclasses.replace(first, counts={"paused": 1}), *rest])
    assert any("paused failing after 1 failed runs" in p for p in early.problems), early.problems
    twice = dataclasses.replace(pause, pauses=2)
    assert any("received 2 jobs.pause calls" in p for p in twice.problems), twice.problems
    assert not early.ok and not twice.ok and feature_row(twice).endswith("FAIL")


def test_a_paused_jobs_tick_reported_missed_or_a_resume_without_a_record_fails_the_pause_row(played):
    _, seen = played
    pause = seen.features[1]
    reported = dataclasses.replace(pause, late={**pause.late, "missed": 2, "reported": 2})
    assert any("its ticks were reported missed" in p for p in reported.problems), reported.problems
    unrecorded = dataclasses.replace(pause, resumed={})
    assert any("runonce resume recorded nothing" in p for p in unrecorded.problems), unrecorded.problems
    again = dataclasses.replace(pause, after_resume={"paused": 1})
    assert any("paused failing again" in p for p in again.problems), again.problems


def test_an_excluded_run_with_an_effect_fails_the_calendar_row(played):
    harness, seen = played
    [run, _] = seen.features[2].runs
    key = next(t.key for t in harness.plan() if t.run.job.name == CALENDAR_JOB)
    with added(harness, OUTBOX, key, {"run_key": key}):
        calendar = harness.judge().features[2]
        assert not calendar.ok and feature_row(calendar).endswith("FAIL")
        assert any(
            f"{run.schedule_time:%H:%M}Z was excluded yet ran 0 bodies, 1 effects" in p
            for p in calendar.problems
        )


def test_an_excluded_run_that_ran_or_was_reported_missed_fails_the_calendar_row(played):
    _, seen = played
    calendar = seen.features[2]
    run = calendar.runs[0]
    completed = dataclasses.replace(run, record={**run.record, "status": "completed"}, bodies=1)
    ran = dataclasses.replace(calendar, runs=[completed, *calendar.runs[1:]])
    assert any("was recorded completed" in p for p in ran.problems), ran.problems
    assert any("was excluded yet ran 1 bodies" in p for p in ran.problems), ran.problems
    missed = dataclasses.replace(calendar, tick={**calendar.tick, "missed": 1, "reported": 1})
    assert any("counted excluded ticks as missed" in p for p in missed.problems), missed.problems
