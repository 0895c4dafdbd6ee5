"""The verdict: did every run take effect exactly once, within its retry window?

A run is judged from Firestore and from the lines the runonce core wrote around its job bodies,
not from what the scheduler saw, and the same way for any job: its ledger record must be finished
(completed or failed permanently) no later than the job's next scheduled time, carry an expire_at
and be finished by the attempt that ran its last body; where the job's folder declares its
effects (see `effects`), a completed run must have exactly one and a failed run none, written by
one of the run's own bodies. No two bodies of a run may have run at the same time (a killed body
ends when its instance died), and a body may start again only after the previous one was killed
or ended retryably. A planned miss (see `misses`) is judged by its plan instead: a run never
delivered has no delivery, no record, no body and no effect; a stuck claim has an `in_progress`
record claimed once per body, every body killed holding it, no effect, and no 2xx seen by
Scheduler. The per-job table adds what the deliveries went through.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime

from localscheduler.scheduler.cloud_scheduler import Trigger
from localscheduler.scheduler.journal import Journal, Sent
from localscheduler.store import as_utc
from localscheduler.verdicts.bodies import Body, succession_problems
from localscheduler.verdicts.table import aligned
from runonce.contract import EXPIRE_AT_FIELD, BodyEnd, MissedRun, RunStatus


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
        """The run took effect exactly once (or failed permanently once) within its window, or,
        for a planned miss, was missed exactly as planned."""
        return not self.problems

    @property
    def miss(self) -> MissedRun | None:
        """The miss the run was planned to be, if any."""
        return self.trigger.miss


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
    if trigger.miss is not None:
        planned = _miss_problems(trigger.miss, record, effects, bodies, sent)
        status = None if record is None else record.get("status")
        return RunVerdict(trigger, status, effects, len(bodies), found, planned)
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
    if EXPIRE_AT_FIELD not in record:
        problems.append(f"ledger record has no {EXPIRE_AT_FIELD}")
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


def _miss_problems(
    miss: MissedRun, record: dict | None, effects: int | None, bodies: Sequence[Body], sent: Sequence[Sent]
) -> tuple[str, ...]:
    """What contradicts the plan of a run lost on purpose."""
    problems = [f"executed {effects} times"] if effects else []
    if miss is MissedRun.NEVER_DELIVERED:
        if sent:
            problems.append(f"planned never delivered, yet delivered {len(sent)} times")
        if record is not None:
            problems.append("planned never delivered, yet it has a ledger record")
        if bodies:
            problems.append(f"planned never delivered, yet {len(bodies)} bodies started")
        return tuple(problems)
    if record is None:
        return (*problems, "planned to stay held, yet it has no ledger record")
    status = record.get("status")
    if status != RunStatus.IN_PROGRESS.value:
        problems.append(f"planned to stay held, yet {status}")
    if record.get("attempts") != len(bodies):
        problems.append(f"{record.get('attempts')} claims on the record, {len(bodies)} bodies started")
    problems += [
        f"body {body.attempt_id} ended {body.end.value}, though every body was to die holding the claim"
        for body in bodies
        if body.end is not None
    ]
    acknowledged = [s.attempt for s in sent if s.acknowledged]
    if acknowledged:
        problems.append(f"Scheduler saw a 2xx for attempt {acknowledged[0]}: its retries did not run out")
    if bodies and bodies[-1].end is None and instance_death(bodies[-1], sent) is None:
        problems.append(f"body {bodies[-1].attempt_id} never ended and its instance was not killed")
    if EXPIRE_AT_FIELD not in record:
        problems.append(f"ledger record has no {EXPIRE_AT_FIELD}")
    return tuple(problems + _body_problems(status, bodies, sent))


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
    problems = succession_problems(bodies, lambda body: instance_death(body, sent))
    last = bodies[-1]
    if status == "completed" and last.end is not BodyEnd.SUCCEEDED:
        problems.append(f"completed, but its last body ended {_ending(last)}")
    if status == "failed" and last.end is not BodyEnd.PERMANENT:
        problems.append(f"failed, but its last body ended {_ending(last)}")
    return problems


def _ending(body: Body) -> str:
    return "killed" if body.end is None else body.end.value


def instance_death(body: Body, sent: Sequence[Sent]) -> datetime | None:
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
    missed: int = 0
    """Runs lost on purpose (see `misses`): never delivered, or their claim left stuck."""
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
    ("missed", "missed"),
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
        row.missed += verdict.miss is not None
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


def failures(verdicts: list[RunVerdict]) -> list[str]:
    """A line for each run that failed its verdict: the run, its problems and its key."""
    lines = []
    for verdict in verdicts:
        if not verdict.ok:
            trigger = verdict.trigger
            kind = "forced run" if trigger.forced else "run"
            lines.append(
                f"  FAIL {trigger.run.team.name}/{trigger.run.job.name} {kind} "
                f"{trigger.run.schedule_time:%Y-%m-%d %H:%M}Z: "
                f"{'; '.join(verdict.problems)} (run key {trigger.key})"
            )
    return lines


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
    """The verdict in words: what the runs and their bodies show about the guarantee, then the
    runs missed on purpose."""
    runs = len(verdicts)
    bad = sum(not v.ok for v in verdicts)
    if bad:
        return [f"{bad} of {runs} runs broke the guarantee (see FAIL lines)"]
    played = [v for v in verdicts if v.miss is None]
    observed = [v for v in played if v.effects is not None]
    effects = sum(v.effects or 0 for v in observed)
    failed = sum(v.status == "failed" for v in observed)
    bodies = sum(v.bodies for v in played)
    again = sum(v.bodies > 1 for v in played)
    found = sum(v.found_effect for v in played)
    lines = [
        f"every run with observed effects had exactly one effect or one recorded permanent failure "
        f"({effects} effects + {failed} failed = {len(observed)} runs), each within its retry window",
        f"{bodies} job bodies for {len(played)} runs, never two of one run at a time; {again} runs started "
        "their body again, each after a kill or a retryable error",
        f"{found} bodies run again after a failure that followed the effect found the effect already "
        "written, and did not write it again",
    ]
    unobserved = sorted({_job_name(v) for v in played if v.effects is None})
    if unobserved:
        lines.append(
            f"effects not observed for {', '.join(unobserved)} (no [effects] in the folder's "
            "local_demo.toml, see localscheduler.verdicts.effects): "
            "judged on the ledger and the job bodies only"
        )
    return lines + miss_summary(verdicts)


MISS_WORDS = {
    MissedRun.NEVER_DELIVERED: "never delivered: no ledger record",
    MissedRun.RETRIED_OUT: "claim left stuck: in_progress after Scheduler's retries ran out",
}


def miss_summary(verdicts: list[RunVerdict]) -> list[str]:
    """One line per run lost on purpose, saying it went as planned (nothing if none was planned)."""
    lines = []
    for verdict in verdicts:
        miss = verdict.miss
        if miss is None:
            continue
        run = verdict.trigger.run
        claims = f", {verdict.bodies} claims, every body killed holding it" if verdict.bodies else ""
        when = f"{run.schedule_time:%Y-%m-%d %H:%M}Z"
        lines.append(f"  {_job_name(verdict)} {when} {miss.value}: {MISS_WORDS[miss]}{claims}")
    if not lines:
        return []
    return [f"{len(lines)} runs missed on purpose, each as planned (expected misses, not failures):", *lines]
