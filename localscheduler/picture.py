"""The demo's picture: every delivery of every run, one lane per run, drawn with matplotlib.

A lane is one run (a scheduled run, a forced run, a run lost on purpose), grouped by job and in
the order the runs were due. Time runs across, in seconds after the run's first delivery was due:
linear up to 10 s, logarithmic beyond, because the deliveries of one run come within seconds
(duplicates, 409s) and minutes apart (Scheduler's backoff, a lease waited out), while two hours
of runs side by side would squeeze each run's story into a dot. Each delivery is a marker at its
send time, shaped and coloured by its answer, with a thin line to when the answer came; a copy of
a duplicated delivery sits a little above its lane. Kills are marked where the instance died,
effects where the body that wrote them ended (or died), and Scheduler giving up where it did.
A job with an overlap policy adds its answers (skipped, waiting), and a run the watchdog caught
up its delivery (`localscheduler.demos.schedules` adds that point: the journal holds Scheduler's
own deliveries only).

Everything comes from the scheduler's journal, the job bodies the instance logs show and the
effects read from the store (a `simulation.Result`); nothing is drawn from what the faults meant
to do. The figure is built without pyplot, on the Agg canvas, so it needs no display.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from enum import Enum
from pathlib import Path

from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.ticker import NullLocator

from localscheduler.scheduler.cloud_scheduler import Trigger
from localscheduler.scheduler.journal import Journal, Sent
from localscheduler.verdicts.bodies import Body
from localscheduler.verdicts.scheduled import instance_death
from runonce.contract import BodyEnd, MissedRun

LINEAR_SECONDS = 10.0
"""Up to here the time axis is linear; beyond, logarithmic."""
COPY_OFFSET = 0.3
"""How far above its lane the duplicate copy of a delivery is drawn (lanes are 1 apart)."""
LANE_INCHES = 0.13
TICKS = [(0, "0"), (5, "5 s"), (10, "10 s"), (30, "30 s"), (60, "1 min"), (120, "2 min"), (300, "5 min")]
TICKS += [(600, "10 min"), (1200, "20 min"), (1800, "30 min")]
MISS_LABELS = {MissedRun.NEVER_DELIVERED: "never delivered", MissedRun.RETRIED_OUT: "claim stuck"}


class Mark(Enum):
    """A kind of point in the picture: its legend text, marker, fill and size."""

    COMPLETED = ("completed (200)", "o", "#2ca02c", 22)
    DUPLICATE = ("duplicate (200)", "o", "#1f77b4", 22)
    FAILED = ("failed permanently (200)", "s", "#9467bd", 24)
    ANSWER_LOST = ("2xx lost on the way (retried)", "o", "none", 26)
    IN_PROGRESS = ("in_progress (409)", "^", "#ff7f0e", 24)
    SKIPPED = ("skipped: its job busy (200)", "s", "#17becf", 24)
    WAITING = ("waiting for the run before (409)", ">", "#8c564b", 24)
    CAUGHT_UP = ("started by the watchdog's catch-up", "p", "#e377c2", 40)
    RETRY = ("retry or error (5xx)", "v", "#d62728", 24)
    OTHER = ("other answer", "P", "#7f7f7f", 24)
    DEADLINE = ("attempt deadline passed", "D", "#bcbd22", 18)
    NO_ANSWER = ("no answer (connection lost)", "x", "#444444", 22)
    NO_INSTANCE = ("no instance free", "1", "#7f7f7f", 30)
    KILLED = ("instance killed", "X", "#000000", 40)
    EFFECT = ("effect written", "*", "#ffd700", 80)
    GAVE_UP = ("Scheduler gave up", "|", "#d62728", 90)
    NOT_DELIVERED = ("never delivered (planned)", "o", "none", 40)

    def __init__(self, label: str, marker: str, color: str, size: int):
        self.label = label
        self.marker = marker
        self.color = color
        self.size = size


# Hollow markers take their colour from the edge.
EDGES = {Mark.ANSWER_LOST: "#2ca02c", Mark.NOT_DELIVERED: "#d62728", Mark.EFFECT: "#000000"}
# Kills and effects over the deliveries; Scheduler giving up comes right after a last attempt's
# kill, and a catch-up's delivery of an instant job right before its effect, so they go over those.
LAYERS = {Mark.KILLED: 3, Mark.EFFECT: 3, Mark.GAVE_UP: 4, Mark.CAUGHT_UP: 4}


@dataclass(frozen=True)
class Point:
    """One mark on a lane, `at` seconds after the run's first delivery was due."""

    at: float
    mark: Mark
    copy: bool = False
    """Drawn a little above the lane: the second copy of a duplicated delivery."""


@dataclass(frozen=True)
class Lane:
    """One run's row."""

    job: str
    """team/job: lanes of one job are drawn together."""
    label: str
    """The run's scheduled time, "forced" for a forced run, and its planned miss if any."""
    points: tuple[Point, ...]
    spans: tuple[tuple[float, float], ...]
    """Each delivery, from its send to its answer (seconds, like the points)."""


def answer_mark(sent: Sent) -> Mark:
    """The mark of one delivery's answer, as Scheduler saw it."""
    if sent.status is None:
        return {"deadline": Mark.DEADLINE, "no_instance": Mark.NO_INSTANCE}.get(sent.outcome, Mark.NO_ANSWER)
    if 200 <= sent.status < 300:
        if not sent.acknowledged:
            return Mark.ANSWER_LOST
        return {
            "completed": Mark.COMPLETED,
            "duplicate": Mark.DUPLICATE,
            "failed": Mark.FAILED,
            "skipped": Mark.SKIPPED,
        }.get(sent.outcome, Mark.OTHER)
    if sent.status == 409:
        return Mark.WAITING if sent.outcome == "waiting" else Mark.IN_PROGRESS
    return Mark.RETRY if sent.status >= 500 else Mark.OTHER


def lanes(
    plan: Sequence[Trigger],
    journal: Journal,
    bodies: Mapping[str, Sequence[Body]],
    writers: Mapping[str, Sequence[str | None]],
) -> list[Lane]:
    """One lane per trigger of `plan`, grouped by job in plan order, each job's runs by due time."""
    sent: dict[tuple, list[Sent]] = {}
    for entry in journal.sent():
        sent.setdefault((entry.team, entry.job, entry.schedule_time, entry.forced), []).append(entry)
    gave_up = {(g.team, g.job, g.schedule_time, g.forced): g.at for g in journal.gave_up()}
    jobs = list(dict.fromkeys(_job(trigger) for trigger in plan))
    ordered = sorted(plan, key=lambda t: (jobs.index(_job(t)), t.at))
    result = []
    for trigger in ordered:
        identity = (*_job(trigger), trigger.run.schedule_time, trigger.forced)
        deliveries = sent.get(identity, [])
        run_bodies = bodies.get(trigger.key, [])
        points = [Point(_after(trigger, s.sent_at), answer_mark(s), s.copy) for s in deliveries]
        deaths = [s.answered_at for s in deliveries if s.killed and s.answered_at]
        points += [Point(_after(trigger, at), Mark.KILLED) for at in deaths]
        points += [
            Point(_after(trigger, at), Mark.EFFECT)
            for at in _effect_times(writers.get(trigger.key, []), run_bodies, deliveries)
        ]
        if identity in gave_up:
            points.append(Point(_after(trigger, gave_up[identity]), Mark.GAVE_UP))
        if trigger.miss is MissedRun.NEVER_DELIVERED:
            points.append(Point(0.0, Mark.NOT_DELIVERED))
        spans = tuple(
            (_after(trigger, s.sent_at), _after(trigger, s.answered_at)) for s in deliveries if s.answered_at
        )
        result.append(Lane("/".join(_job(trigger)), _label(trigger), tuple(points), spans))
    return result


def _job(trigger: Trigger) -> tuple[str, str]:
    return (trigger.run.team.name, trigger.run.job.name)


def _after(trigger: Trigger, moment: datetime) -> float:
    return (moment - trigger.at).total_seconds()


def _label(trigger: Trigger) -> str:
    words = [f"{trigger.run.schedule_time:%H:%M}"]
    if trigger.forced:
        words.append("forced")
    if trigger.miss is not None:
        words.append(MISS_LABELS[trigger.miss])
    return " ".join(words)


def _effect_times(
    writers: Sequence[str | None], bodies: Sequence[Body], sent: Sequence[Sent]
) -> list[datetime]:
    """When each effect had landed: the end (or death) of the body that wrote it; for an effect whose
    writer is not recorded, the end of the run's last succeeded body."""
    by_attempt = {body.attempt_id: body for body in bodies}
    succeeded = [body for body in bodies if body.end is BodyEnd.SUCCEEDED]
    times = []
    for writer in writers:
        body = by_attempt.get(writer) if writer is not None else (succeeded[-1] if succeeded else None)
        moment = None if body is None else body.ended or instance_death(body, sent)
        if moment is not None:
            times.append(moment)
    return times


def figure(runs: Sequence[Lane], title: str) -> Figure:
    """The picture of `runs`: one row per lane, top to bottom, a legend of every mark used."""
    fig = Figure(figsize=(11, 2.4 + LANE_INCHES * len(runs)), layout="constrained")
    FigureCanvasAgg(fig)
    ax = fig.add_subplot()
    groups: dict[str, list[int]] = {}
    for index, lane in enumerate(runs):
        groups.setdefault(lane.job, []).append(index)
    for number, rows in enumerate(groups.values()):
        if number % 2:
            ax.axhspan(rows[0] - 0.5, rows[-1] + 0.5, color="#f2f2f2", zorder=0)
    spans = [(index, start, end) for index, lane in enumerate(runs) for start, end in lane.spans]
    if spans:
        ys, starts, ends = zip(*spans, strict=True)
        ax.hlines(ys, starts, ends, colors="#b0b0b0", linewidth=0.8, zorder=1)
    latest = 0.0
    for mark in Mark:
        found = [
            (point.at, index - COPY_OFFSET * point.copy)
            for index, lane in enumerate(runs)
            for point in lane.points
            if point.mark is mark
        ]
        if not found:
            continue
        xs, ys = zip(*found, strict=True)
        latest = max(latest, *xs)
        ax.scatter(
            xs,
            ys,
            s=mark.size,
            marker=mark.marker,
            c=mark.color if mark.color != "none" else "none",
            edgecolors=EDGES.get(mark),
            linewidths=0.9,
            label=mark.label,
            zorder=LAYERS.get(mark, 2),
        )
    ax.set_xscale("symlog", linthresh=LINEAR_SECONDS, linscale=0.7)
    ticks = [(at, text) for at, text in TICKS if at <= latest * 1.5] or TICKS[:3]
    ax.set_xticks([at for at, _ in ticks], [text for _, text in ticks])
    ax.xaxis.set_minor_locator(NullLocator())
    ax.set_xlim(-1, max(latest * 1.3, LINEAR_SECONDS * 2))
    ax.set_ylim(len(runs) - 0.5, -0.7)
    ax.set_yticks(range(len(runs)), [lane.label for lane in runs], fontsize=6)
    ax.grid(axis="x", color="#dddddd", linewidth=0.6)
    ax.set_xlabel("time after the run's first delivery was due (linear to 10 s, then logarithmic)")
    jobs = ax.secondary_yaxis("right")
    jobs.set_yticks([sum(rows) / len(rows) for rows in groups.values()], list(groups), fontsize=8)
    jobs.tick_params(length=0)
    ax.set_title(title, fontsize=10)
    if any(lane.points for lane in runs):
        fig.legend(loc="outside lower center", ncol=4, fontsize=7, frameon=False, scatterpoints=1)
    return fig


def save(runs: Sequence[Lane], title: str, path: Path, dpi: int = 110) -> Path:
    """Draw `runs` and write the picture to `path` (its folder is created); returns `path`."""
    path.parent.mkdir(parents=True, exist_ok=True)
    figure(runs, title).savefig(path, dpi=dpi)
    return path
