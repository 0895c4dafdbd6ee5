"""The verdict: did every run take effect exactly once, within its retry window?

A run is judged from Firestore, not from what the scheduler saw: its ledger record must be
finished (completed or failed permanently) no later than the job's next scheduled time, carry
an expire_at, and the job's outbox must hold exactly one effect for a completed run and none
for a failed one. The per-job table adds what the deliveries went through.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from .journal import Journal
from .scheduler import Trigger
from .store import StoreView, as_utc


@dataclass(frozen=True)
class RunVerdict:
    """How one run ended, and what is wrong with it (nothing, for a good run)."""

    trigger: Trigger
    status: str | None
    """Ledger status: completed, failed, in_progress, or None (no record)."""
    executions: int
    """Effects the job wrote for this run (outbox documents with its run key)."""
    claims: int
    """How many attempts claimed the run, i.e. started the job body."""
    problems: tuple[str, ...]

    @property
    def ok(self) -> bool:
        """The run took effect exactly once (or failed permanently once) within its window."""
        return not self.problems


def judge(trigger: Trigger, view: StoreView) -> RunVerdict:
    """The verdict on one run from one read of the store."""
    record = view.records.get(trigger.key)
    executions = view.effects.get(trigger.key, 0)
    if record is None:
        return RunVerdict(trigger, None, executions, 0, ("never ran: no ledger record",))
    status = record.get("status")
    problems = []
    if status not in ("completed", "failed"):
        problems.append(f"never completed: still {status}")
    elif as_utc(record["finished_at"]) > trigger.stop:
        problems.append(f"finished at {as_utc(record['finished_at']):%H:%M:%S}, after its retry window")
    expected = 1 if status == "completed" else 0
    if executions != expected:
        problems.append(f"executed {executions} times")
    if "expire_at" not in record:
        problems.append("ledger record has no expire_at")
    return RunVerdict(trigger, status, executions, int(record.get("attempts", 0)), tuple(problems))


@dataclass
class JobRow:
    """One line of the table: the counts of one job."""

    team: str
    job: str
    scheduled: int = 0
    forced: int = 0
    deliveries: int = 0
    executions: int = 0
    """Runs whose job ran to its outcome: an effect in the outbox, or a recorded permanent failure."""
    permanent_failures: int = 0
    """Of those, the runs that failed permanently (and so wrote no effect)."""
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
    ("executions", "executions"),
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
        row.executions += verdict.executions + (verdict.status == "failed")
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
    widths = [max(len(line[i]) for line in lines) for i in range(len(COLUMNS))]
    text = [
        "  ".join(
            cell.ljust(w) if i == 0 else cell.rjust(w)
            for i, (cell, w) in enumerate(zip(line, widths, strict=True))
        )
        for line in lines
    ]
    text.insert(1, "-" * len(text[0]))
    text.insert(len(text) - 1, "-" * len(text[0]))
    return "\n".join(text)


def fault_summary(journal: Journal) -> str:
    """One line: how often each fault hit a first attempt, and how many instances were killed."""
    counts = Counter(s.fault for s in journal.sent() if s.attempt == 1 and not s.copy and s.fault != "none")
    killed = sum(s.killed for s in journal.sent())
    parts = [f"{name} {count}" for name, count in sorted(counts.items())]
    return f"faults injected: {', '.join(parts) or 'none'}; instances killed mid-run: {killed}"
