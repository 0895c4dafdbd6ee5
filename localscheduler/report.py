"""The verdict: did every run take effect exactly once, within its retry window?

A run is judged from Firestore and from what its job bodies logged, not from what the scheduler
saw: its ledger record must be finished (completed or failed permanently) no later than the
job's next scheduled time and carry an expire_at; the outbox must hold exactly one effect for a
completed run and none for a failed one, and match the effects the bodies logged. No two bodies
of a run may have run at the same time (a killed body ends when its instance died), a body may
start again only after the previous one was killed or raised a retryable error, and only a body
after one killed after its effect may find the effect already written. The per-job table adds
what the deliveries went through.
"""

from __future__ import annotations

import itertools
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime

from .bodies import Body
from .journal import Journal, Sent
from .scheduler import Trigger
from .store import StoreView, as_utc
from .table import aligned

PERMANENT = "PermanentError"


@dataclass(frozen=True)
class RunVerdict:
    """How one run ended, and what is wrong with it (nothing, for a good run)."""

    trigger: Trigger
    status: str | None
    """Ledger status: completed, failed, in_progress, or None (no record)."""
    effects: int
    """Effects the job wrote for this run (outbox documents with its run key)."""
    bodies: int
    """How many times the job body started for this run."""
    found_published: int
    """Bodies that reached the effect and found it already written by an earlier attempt."""
    problems: tuple[str, ...]

    @property
    def ok(self) -> bool:
        """The run took effect exactly once (or failed permanently once) within its window."""
        return not self.problems


def judge(trigger: Trigger, view: StoreView, bodies: Sequence[Body], sent: Sequence[Sent]) -> RunVerdict:
    """The verdict on one run from one read of the store, its bodies (in start order) and its
    deliveries."""
    record = view.records.get(trigger.key)
    effects = view.effects.get(trigger.key, 0)
    found = sum(body.found_published for body in bodies)
    if record is None:
        return RunVerdict(trigger, None, effects, len(bodies), found, ("never ran: no ledger record",))
    status = record.get("status")
    problems = []
    if status not in ("completed", "failed"):
        problems.append(f"never completed: still {status}")
    elif as_utc(record["finished_at"]) > trigger.stop:
        problems.append(f"finished at {as_utc(record['finished_at']):%H:%M:%S}, after its retry window")
    expected = 1 if status == "completed" else 0
    if effects != expected:
        problems.append(f"executed {effects} times")
    if "expire_at" not in record:
        problems.append("ledger record has no expire_at")
    problems += _body_problems(status, effects, bodies, sent)
    if bodies and status in ("completed", "failed") and record.get("attempt_id") != bodies[-1].attempt_id:
        problems.append(f"finished by attempt {record.get('attempt_id')}, not by its last body's")
    return RunVerdict(trigger, status, effects, len(bodies), found, tuple(problems))


def _body_problems(
    status: str | None, effects: int, bodies: Sequence[Body], sent: Sequence[Sent]
) -> list[str]:
    """What the bodies' own story contradicts: overlap, unexplained restarts, effects."""
    if not bodies:
        return ["no job body started"]
    problems = []
    published = sum(body.published for body in bodies)
    if published != effects:
        problems.append(f"bodies logged {published} effects, the outbox holds {effects}")
    for earlier, later in itertools.pairwise(bodies):
        death = _death(earlier, sent)
        end = earlier.ended or death
        if end is None:
            problems.append(f"body {earlier.attempt_id} never ended and its instance was not killed")
        elif end > later.started:
            problems.append(f"bodies {earlier.attempt_id} and {later.attempt_id} ran at the same time")
        retryable = earlier.outcome == "raised" and earlier.error != PERMANENT
        if not retryable and death is None:
            problems.append(f"body started again after {earlier.attempt_id} ended {earlier.outcome}")
    for index, body in enumerate(bodies):
        if body.found_published and not any(b.published for b in bodies[:index]):
            problems.append(f"body {body.attempt_id} found an effect no earlier body wrote")
    last = bodies[-1]
    if status == "completed" and not (last.published or last.found_published):
        problems.append(f"completed, but its last body ended {last.outcome}")
    if status == "failed" and last.error != PERMANENT:
        problems.append(f"failed, but its last body ended {last.outcome}")
    return problems


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
    """Outbox documents: one per completed run."""
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
        row.effects += verdict.effects
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
        for name, _ in COLUMNS[1:-1]:
            setattr(total, name, getattr(total, name) + getattr(row, name))
        total.bad.extend(row.bad)
    lines = [[title for _, title in COLUMNS]]
    lines += [[str(getattr(row, name)) for name, _ in COLUMNS[1:]] for row in [*rows, total]]
    for line, row in zip(lines[1:], [*rows, total], strict=True):
        line.insert(0, f"{row.team}/{row.job}" if row.team else row.job)
    return aligned(lines, total=True)


def fault_summary(journal: Journal) -> str:
    """One line: how often each fault hit a first attempt, and how many instances were killed."""
    counts = Counter(s.fault for s in journal.sent() if s.attempt == 1 and not s.copy and s.fault != "none")
    killed = sum(s.killed for s in journal.sent())
    parts = [f"{name} {count}" for name, count in sorted(counts.items())]
    return f"faults injected: {', '.join(parts) or 'none'}; instances killed mid-run: {killed}"


def guarantee_summary(verdicts: list[RunVerdict]) -> list[str]:
    """The verdict in words: what the runs and their bodies show about the guarantee."""
    runs = len(verdicts)
    effects = sum(v.effects for v in verdicts)
    failed = sum(v.status == "failed" for v in verdicts)
    bodies = sum(v.bodies for v in verdicts)
    again = sum(v.bodies > 1 for v in verdicts)
    found = sum(v.found_published for v in verdicts)
    bad = sum(not v.ok for v in verdicts)
    if bad:
        return [f"{bad} of {runs} runs broke the guarantee (see FAIL lines)"]
    return [
        f"every run had exactly one effect or one recorded permanent failure ({effects} effects + "
        f"{failed} failed = {runs} runs), each within its retry window",
        f"{bodies} job bodies for {runs} runs, never two of one run at a time; {again} runs started "
        "their body again, each after a kill or a retryable error",
        f"{found} bodies run again after a kill that followed the effect found the effect already "
        "written, and did not write it again",
    ]
