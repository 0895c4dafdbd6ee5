"""The verdict: did every run take effect exactly once, within its retry window?

A run is judged from Firestore and from the lines the runonce core wrote around its job bodies,
not from what the scheduler saw, and the same way for any job: its ledger record must be finished
(completed or failed permanently) no later than the job's next scheduled time, carry an expire_at
and be finished by the attempt that ran its last body; where the job's folder declares its
effects (see `effects`), a completed run must have exactly one and a failed run none, written by
one of the run's own bodies. No two bodies of a run may have run at the same time (a killed body
ends when its instance died), and a body may start again only after the previous one was killed
or ended retryably. The per-job table adds what the deliveries went through.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime

from runonce.contract import BodyEnd

from .bodies import Body, succession_problems
from .journal import Journal, Sent
from .scheduler import Trigger
from .store import as_utc
from .table import aligned


@dataclass(frozen=True)
class RunVerdict:
    """How one run ended, and what is wrong with it (nothing, for a good run)."""

    trigger: Trigger
    status: str | None
    """Ledger status: completed, failed, in_progress, or None (no record)."""
    effects: int | None
    """Effects the job wrote for this run; None where its folder declares none to look at."""
    bodies: int
    """How many times the job body started for this run."""
    found_effect: int
    """Bodies that started after the one that wrote the run's effect (and was then killed or
    failed retryably) and succeeded without writing it again."""
    problems: tuple[str, ...]

    @property
    def ok(self) -> bool:
        """The run took effect exactly once (or failed permanently once) within its window."""
        return not self.problems


def judge(
    trigger: Trigger,
    record: dict | None,
    writers: Sequence[str | None] | None,
    bodies: Sequence[Body],
    sent: Sequence[Sent],
) -> RunVerdict:
    """The verdict on one run from its ledger record, the writers of its effects (one attempt id,
    or None if not recorded, per effect; None if its effects are not observed), its bodies (in
    start order) and its deliveries."""
    effects = None if writers is None else len(writers)
    found = _found_effect(writers or [], bodies)
    if record is None:
        return RunVerdict(trigger, None, effects, len(bodies), found, ("never ran: no ledger record",))
    status = record.get("status")
    problems = []
    if status not in ("completed", "failed"):
        problems.append(f"never completed: still {status}")
    elif as_utc(record["finished_at"]) > trigger.stop:
        problems.append(f"finished at {as_utc(record['finished_at']):%H:%M:%S}, after its retry window")
    if effects is not None and effects != (1 if status == "completed" else 0):
        problems.append(f"executed {effects} times")
    if "expire_at" not in record:
        problems.append("ledger record has no expire_at")
    problems += _body_problems(status, bodies, sent)
    started = {body.attempt_id for body in bodies}
    problems += [
        f"effect written by attempt {writer}, which started no body of this run"
        for writer in writers or []
        if writer is not None and writer not in started
    ]
    if bodies and status in ("completed", "failed") and record.get("attempt_id") != bodies[-1].attempt_id:
        problems.append(f"finished by attempt {record.get('attempt_id')}, not by its last body's")
    return RunVerdict(trigger, status, effects, len(bodies), found, tuple(problems))


def _found_effect(writers: Sequence[str | None], bodies: Sequence[Body]) -> int:
    """Bodies that succeeded after the body that wrote the effect started (so found it written)."""
    starts = [index for index, body in enumerate(bodies) if body.attempt_id in writers]
    if not starts:
        return 0
    return sum(body.end is BodyEnd.SUCCEEDED for body in bodies[starts[0] + 1 :])


def _body_problems(status: str | None, bodies: Sequence[Body], sent: Sequence[Sent]) -> list[str]:
    """What the bodies' own story contradicts: overlap, unexplained restarts, the ending."""
    if not bodies:
        return ["no job body started"]
    problems = succession_problems(bodies, lambda body: _death(body, sent))
    last = bodies[-1]
    if status == "completed" and last.end is not BodyEnd.SUCCEEDED:
        problems.append(f"completed, but its last body ended {_ending(last)}")
    if status == "failed" and last.end is not BodyEnd.PERMANENT:
        problems.append(f"failed, but its last body ended {_ending(last)}")
    return problems


def _ending(body: Body) -> str:
    return "killed" if body.end is None else body.end.value


def _death(body: Body, sent: Sequence[Sent]) -> datetime | None:
    """When the instance running `body` died for one of this run's attempts (None: it did not)."""
    deaths = [
        s.answered_at
        for s in sent
        if s.killed and s.instance == body.instance and s.answered_at and s.answered_at >= body.started
    ]
    return min(deaths, default=None)


@dataclass
class JobRow:
    """One line of the table: the counts of one job."""

    team: str
    job: str
    scheduled: int = 0
    forced: int = 0
    deliveries: int = 0
    bodies: int = 0
    """Times a job body started (more than once for a run only after a kill or a retryable error)."""
    effects: int = 0
    """The job's declared effects: one per completed run."""
    unobserved: int = 0
    """Runs whose effects could not be counted (the job's folder declares none)."""
    permanent_failures: int = 0
    """Runs that failed permanently (recorded once, no effect)."""
    duplicates_skipped: int = 0
    conflicts: int = 0
    retries: int = 0
    bad: list[RunVerdict] = field(default_factory=list)

    @property
    def verdict(self) -> str:
        """ "ok", or how many runs went wrong."""
        return "ok" if not self.bad else f"FAIL ({len(self.bad)} runs)"


COLUMNS = [
    ("job", "job"),
    ("scheduled", "scheduled"),
    ("forced", "forced"),
    ("deliveries", "deliveries"),
    ("bodies", "bodies started"),
    ("effects", "effects"),
    ("permanent_failures", "perm. failed"),
    ("duplicates_skipped", "dup. skipped"),
    ("conflicts", "409s"),
    ("retries", "retries"),
    ("verdict", "verdict"),
]


def job_rows(verdicts: list[RunVerdict], journal: Journal) -> list[JobRow]:
    """The table's rows, one per job, in the order the jobs first appear."""
    rows: dict[tuple[str, str], JobRow] = {}
    for verdict in verdicts:
        run = verdict.trigger.run
        row = rows.setdefault((run.team.name, run.job.name), JobRow(run.team.name, run.job.name))
        if verdict.trigger.forced:
            row.forced += 1
        else:
            row.scheduled += 1
        row.bodies += verdict.bodies
        row.effects += verdict.effects or 0
        row.unobserved += verdict.effects is None
        row.permanent_failures += verdict.status == "failed"
        if not verdict.ok:
            row.bad.append(verdict)
    for sent in journal.sent():
        target = rows.get((sent.team, sent.job))
        if target is None:
            continue
        target.deliveries += 1
        target.duplicates_skipped += sent.outcome == "duplicate"
        target.conflicts += sent.status == 409
        target.retries += sent.attempt > 1 and not sent.copy
    return list(rows.values())


def render(rows: list[JobRow]) -> str:
    """The rows as an aligned text table with a total line."""
    total = JobRow("", "total")
    for row in rows:
        for name in [name for name, _ in COLUMNS[1:-1]] + ["unobserved"]:
            setattr(total, name, getattr(total, name) + getattr(row, name))
        total.bad.extend(row.bad)
    lines = [[title for _, title in COLUMNS]]
    lines += [[_cell(row, name) for name, _ in COLUMNS[1:]] for row in [*rows, total]]
    for line, row in zip(lines[1:], [*rows, total], strict=True):
        line.insert(0, f"{row.team}/{row.job}" if row.team else row.job)
    return aligned(lines, total=True)


def _job_name(verdict: RunVerdict) -> str:
    return f"{verdict.trigger.run.team.name}/{verdict.trigger.run.job.name}"


def _cell(row: JobRow, name: str) -> str:
    """A count as text; effects not observed for every run show as "n/a" (or "3+n/a")."""
    if name == "effects" and row.unobserved:
        return f"{row.effects}+n/a" if row.effects else "n/a"
    return str(getattr(row, name))


def fault_summary(journal: Journal) -> str:
    """One line: how often each fault hit a first attempt, and how many instances were killed."""
    counts = Counter(s.fault for s in journal.sent() if s.attempt == 1 and not s.copy and s.fault != "none")
    killed = sum(s.killed for s in journal.sent())
    parts = [f"{name} {count}" for name, count in sorted(counts.items())]
    return f"faults injected: {', '.join(parts) or 'none'}; instances killed mid-run: {killed}"


def guarantee_summary(verdicts: list[RunVerdict]) -> list[str]:
    """The verdict in words: what the runs and their bodies show about the guarantee."""
    runs = len(verdicts)
    bad = sum(not v.ok for v in verdicts)
    if bad:
        return [f"{bad} of {runs} runs broke the guarantee (see FAIL lines)"]
    observed = [v for v in verdicts if v.effects is not None]
    effects = sum(v.effects or 0 for v in observed)
    failed = sum(v.status == "failed" for v in observed)
    bodies = sum(v.bodies for v in verdicts)
    again = sum(v.bodies > 1 for v in verdicts)
    found = sum(v.found_effect for v in verdicts)
    lines = [
        f"every run with observed effects had exactly one effect or one recorded permanent failure "
        f"({effects} effects + {failed} failed = {len(observed)} runs), each within its retry window",
        f"{bodies} job bodies for {runs} runs, never two of one run at a time; {again} runs started "
        "their body again, each after a kill or a retryable error",
        f"{found} bodies run again after a failure that followed the effect found the effect already "
        "written, and did not write it again",
    ]
    unobserved = sorted({_job_name(v) for v in verdicts if v.effects is None})
    if unobserved:
        lines.append(
            f"effects not observed for {', '.join(unobserved)} (no [effects] in the folder's "
            "local_demo.toml, see localscheduler.effects): judged on the ledger and the job bodies only"
        )
    return lines
