"""The timeline picture, built from a small delivery log made by hand: one lane per run, each
delivery marked by its answer, kills, effects, Scheduler giving up and a run never delivered
marked where they happened (checked on the matplotlib objects, not on pixels)."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime, timedelta

import pytest

from localscheduler.picture import Mark, figure, lanes, save
from localscheduler.scheduler.cloud_scheduler import Trigger
from localscheduler.scheduler.journal import GaveUp, Journal, NotDelivered, Sent
from localscheduler.scheduler.plan import PlannedRun
from localscheduler.verdicts.bodies import Body
from runonce.contract import BodyEnd, MissedRun
from stacks.team import Job, Team

pytestmark = pytest.mark.fast

T0 = datetime(2026, 3, 29, 1, 0, tzinfo=UTC)
SYNC = Job(name="sync", schedule="*/2 * * * *", source="report")
REPORT = Job(name="report", schedule="*/10 * * * *", source="report")
TEAM = Team(name="demo", project="runonce-demo", region="europe-west1", jobs=[SYNC, REPORT])


def _trigger(job: Job, minute: int, forced: bool = False, miss: MissedRun | None = None) -> Trigger:
    run = PlannedRun(TEAM, job, T0 + timedelta(minutes=minute), T0 + timedelta(minutes=minute + 2))
    at = run.schedule_time - timedelta(seconds=30) if forced else run.schedule_time
    return Trigger(run, forced, at, run.next_time, miss)


def _at(trigger: Trigger, seconds: float) -> datetime:
    return trigger.at + timedelta(seconds=seconds)


def _sent(
    trigger: Trigger, attempt: int, sent: float, answered: float, status: int | None, outcome: str, **kw
):
    fields = {
        "copy": False,
        "fault": "none",
        "instance": "i-0",
        "acknowledged": status == 200,
        "killed": False,
    }
    fields.update(kw)
    return Sent(
        team=TEAM.name,
        job=trigger.run.job.name,
        schedule_time=trigger.run.schedule_time,
        forced=trigger.forced,
        attempt=attempt,
        sent_at=_at(trigger, sent),
        status=status,
        outcome=outcome,
        answered_at=_at(trigger, answered),
        **fields,
    )


# A run killed after its effect, taken over after the lease; a duplicated run; a forced run whose
# answer was lost; a report run never delivered; a report run retried until Scheduler gave up.
KILLED = _trigger(SYNC, 0)
DOUBLED = _trigger(SYNC, 2)
FORCED = _trigger(SYNC, 4, forced=True)
SKIPPED = _trigger(REPORT, 0, miss=MissedRun.NEVER_DELIVERED)
GIVEN_UP = _trigger(REPORT, 10)
PLAN = [KILLED, DOUBLED, FORCED, SKIPPED, GIVEN_UP]


@pytest.fixture
def journal() -> Journal:
    log = Journal()
    for entry in [
        _sent(KILLED, 1, 0, 2, None, "connection", killed=True),
        _sent(KILLED, 2, 5, 6, 409, "in_progress"),
        _sent(KILLED, 3, 40, 41, 200, "completed", instance="i-1"),
        _sent(DOUBLED, 1, 0, 1, 200, "completed"),
        _sent(DOUBLED, 1, 0, 1, 409, "in_progress", copy=True, instance="i-1"),
        _sent(FORCED, 1, 0, 1, 200, "completed", acknowledged=False),
        _sent(FORCED, 2, 5, 6, 200, "duplicate"),
        _sent(GIVEN_UP, 1, 0, 1, 500, "retry"),
        _sent(GIVEN_UP, 2, 30, 31, 500, "retry"),
        GaveUp(TEAM.name, "report", GIVEN_UP.run.schedule_time, False, 2, _at(GIVEN_UP, 31)),
        NotDelivered(TEAM.name, "report", SKIPPED.run.schedule_time, False, SKIPPED.at),
    ]:
        log.add(entry)
    return log


BODIES = {
    KILLED.key: [
        Body(KILLED.key, "a1", "i-0", _at(KILLED, 0.5)),
        Body(KILLED.key, "a2", "i-1", _at(KILLED, 40.2), _at(KILLED, 40.5), BodyEnd.SUCCEEDED),
    ],
    DOUBLED.key: [Body(DOUBLED.key, "b1", "i-0", _at(DOUBLED, 0.2), _at(DOUBLED, 0.6), BodyEnd.SUCCEEDED)],
    FORCED.key: [Body(FORCED.key, "c1", "i-0", _at(FORCED, 0.2), _at(FORCED, 0.7), BodyEnd.SUCCEEDED)],
}
WRITERS = {KILLED.key: ["a1"], DOUBLED.key: ["b1"], FORCED.key: [None], SKIPPED.key: [], GIVEN_UP.key: []}


def _points(fig, label: str) -> list[tuple[float, float]]:
    """The (x, y) of every point the collection labelled `label` draws."""
    [ax] = [axes for axes in fig.axes if axes.collections]
    [collection] = [c for c in ax.collections if c.get_label() == label]
    return [tuple(point) for point in collection.get_offsets().tolist()]


def test_there_is_one_lane_per_run_grouped_by_job_in_the_order_the_runs_were_due(journal):
    fig = figure(lanes(PLAN, journal, BODIES, WRITERS), "demo")
    ax = fig.axes[0]
    assert [label.get_text() for label in ax.get_yticklabels()] == [
        "01:00",
        "01:02",
        "01:04 forced",
        "01:00 never delivered",
        "01:10",
    ]
    [jobs] = ax.child_axes
    assert [label.get_text() for label in jobs.get_yticklabels()] == ["demo/sync", "demo/report"]


def test_each_delivery_is_marked_by_its_answer_at_its_send_time(journal):
    fig = figure(lanes(PLAN, journal, BODIES, WRITERS), "demo")
    assert _points(fig, Mark.COMPLETED.label) == [(40.0, 0.0), (0.0, 1.0)]
    assert _points(fig, Mark.IN_PROGRESS.label) == [(5.0, 0.0), (0.0, 0.7)]  # the copy sits above its lane
    assert _points(fig, Mark.ANSWER_LOST.label) == [(0.0, 2.0)]
    assert _points(fig, Mark.DUPLICATE.label) == [(5.0, 2.0)]
    assert _points(fig, Mark.RETRY.label) == [(0.0, 4.0), (30.0, 4.0)]
    assert _points(fig, Mark.NO_ANSWER.label) == [(0.0, 0.0)]


def test_kills_effects_giving_up_and_a_run_never_delivered_are_marked_where_they_happened(journal):
    fig = figure(lanes(PLAN, journal, BODIES, WRITERS), "demo")
    assert _points(fig, Mark.KILLED.label) == [(2.0, 0.0)]
    # The killed body wrote the effect: it landed by the kill. The unattributed one: at the body's end.
    assert _points(fig, Mark.EFFECT.label) == [(2.0, 0.0), (0.6, 1.0), (0.7, 2.0)]
    assert _points(fig, Mark.GAVE_UP.label) == [(31.0, 4.0)]
    assert _points(fig, Mark.NOT_DELIVERED.label) == [(0.0, 3.0)]


def test_the_legend_names_every_mark_drawn_and_no_other(journal):
    fig = figure(lanes(PLAN, journal, BODIES, WRITERS), "demo")
    [legend] = fig.legends
    drawn = {c.get_label() for c in fig.axes[0].collections if not c.get_label().startswith("_")}
    assert {text.get_text() for text in legend.get_texts()} == drawn
    assert Mark.DEADLINE.label not in drawn


def test_a_forced_run_s_lane_starts_at_its_own_first_delivery_not_at_its_schedule_time(journal):
    [lane] = [lane for lane in lanes(PLAN, journal, BODIES, WRITERS) if lane.label.endswith("forced")]
    assert min(point.at for point in lane.points) == 0.0
    assert lane.spans == ((0.0, 1.0), (5.0, 6.0))


def test_the_picture_is_written_as_a_png(journal, tmp_path):
    path = save(lanes(PLAN, journal, BODIES, WRITERS), "demo", tmp_path / "build" / "timeline.png")
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_a_hundred_runs_get_a_taller_picture_with_one_tick_per_lane(journal):
    many = [dataclasses.replace(KILLED, at=KILLED.at + timedelta(minutes=2 * n)) for n in range(100)]
    fig = figure(lanes(many, Journal(), {}, {}), "demo")
    assert len(fig.axes[0].get_yticks()) == 100
    assert fig.get_figheight() > figure(lanes(PLAN, journal, BODIES, WRITERS), "demo").get_figheight() * 3


def test_a_window_without_runs_gives_an_empty_picture_without_a_legend():
    fig = figure([], "demo")
    assert (len(fig.axes[0].get_yticks()), fig.legends) == (0, [])
