"""`runonce show`: one run's whole record, its dead-letter copy, and what the operator can do next.

Every next step is one the tool (or gcloud) accepts in the run's state, as the store says it is
now: a `rerun` only for a scheduled run the ledger would take a request for, a `replay` only for
a copy still in the subscription that a replay would not refuse, a `release` only for a claim
whose lease ended. Where nothing would be accepted yet, the step has no command and says what to
wait for.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from operate import dead_letters, replay, runs
from operate.clients import Unavailable
from operate.paused import JobState
from operate.release import RELEASE
from operate.rerun import Target, interval_refusal
from operate.team import EventJob, ScheduledJob, TeamView
from runonce._instant import parse_instant
from runonce.contract import (
    ACTIONS_FIELD,
    DEAD_LETTER_FAILED_AT_FIELD,
    DEAD_LETTER_MESSAGE_ID_FIELD,
    EXPIRE_AT_FIELD,
    HISTORY_FIELD,
    SKIPPED_FOR_FIELD,
    RunStatus,
)
from runonce.core.store import RERUN_OF_FIELD, Store, waiting_note
from runonce.scheduler.expected import expected_times, next_time
from runonce.store._records import lease_live, pending_request


@dataclass(frozen=True)
class Step:
    """One thing the operator can do: a command the tool accepts now (None: nothing to run yet),
    and why."""

    command: str | None
    why: str

    def json(self) -> dict[str, Any]:
        """The step as `show` prints it."""
        return {"command": self.command, "why": self.why}


def job_of(team: TeamView, record: dict[str, Any]) -> ScheduledJob | EventJob | None:
    """The team's job the record is a run of, if it is one of the team's."""
    for job in team.jobs:
        if record.get("job") == job.scheduler_job:
            return job
    for event_job in team.event_jobs:
        if all(record.get(name) == value for name, value in event_job.records.items()):
            return event_job
    return None


def copy_of(subscriber: Callable[[], Any], job: EventJob, record: dict[str, Any]) -> dict[str, Any] | None:
    """The record's dead-letter copy as `runonce dead-letters` shows it, if it is still there."""
    copy_id = record.get(DEAD_LETTER_MESSAGE_ID_FIELD)
    if not copy_id:
        return None
    try:
        letters = dead_letters.listing(subscriber(), [job])
    except Unavailable as exc:  # the record is still worth showing
        return {"copy_id": copy_id, "unavailable": str(exc)}
    for letter in letters:
        if letter.copy_id == copy_id:
            return letter.json()
    return None


@dataclass(frozen=True)
class Situation:
    """What `next_steps` looks at: the run, its job, the ledger and the time."""

    team: TeamView
    store: Store
    key: str
    record: dict[str, Any] | None
    job: ScheduledJob | EventJob | None
    now: datetime
    note: dict[str, Any] | None = None
    """The run's waiting note, if it has no record but was answered 409 `waiting`
    (docs/schedules/overlap.md)."""

    @property
    def where(self) -> str:
        return f"--team {self.team.name}"

    def target(self, job: ScheduledJob) -> Target:
        team = self.team
        return Target(
            team.name, job.name, job.scheduler_job, team.project, job.location, job.schedule, job.time_zone
        )

    def busy(self, job: ScheduledJob) -> str | None:
        """Why a forced delivery of `job` now would not run as a forced run of its own (nor a
        re-run request be taken), or None."""
        target = self.target(job)
        refusal = interval_refusal(self.store, target, self.now)
        if refusal is not None:
            return refusal
        slot = self.store.read(target.slot)
        if pending_request(slot, self.now):
            assert slot is not None
            return (
                f"the job has a pending re-run request (of run {slot.get('rerun_key')}, until "
                f"{slot.get('request_expires')}): a forced delivery now carries that re-run"
            )
        return None

    def rerun(self, job: ScheduledJob, schedule_time: str, why: str, insist: bool = False) -> Step:
        """The `runonce rerun` of this scheduled run, if the ledger would take it now."""
        command = f"runonce rerun {self.where} --job {job.name} --time {schedule_time}"
        command += " --insist" if insist else ""
        busy = self.busy(job)
        if busy is not None:
            return Step(None, f"wait: {busy}; until then `{command}` is refused")
        return Step(command, why)

    def backfill(self, job: ScheduledJob, schedule_time: str, why: str) -> Step:
        """The `runonce backfill` of exactly this run (a window holding its schedule time alone),
        if a forced delivery now would start it."""
        command = self.backfill_command(job, schedule_time)
        busy = self.busy(job)
        if busy is not None:
            return Step(None, f"wait: {busy}; until then `{command}` would not start the run")
        return Step(command, why)

    def backfill_command(self, job: ScheduledJob, schedule_time: str) -> str:
        """`runonce backfill` of a window that holds the run at `schedule_time` alone."""
        return f"runonce backfill {self.where} --job {job.name} --from {schedule_time} --to {schedule_time}"

    def force(self, job: ScheduledJob, why: str) -> Step:
        """Run the job now as a forced run (gcloud), if the delivery would run as one."""
        command = self.gcloud_run(job)
        busy = self.busy(job)
        if busy is not None:
            return Step(None, f"wait: {busy}; until then `{command}` would not run the job")
        upcoming = next_time(job.schedule, job.time_zone, self.now).strftime("%Y-%m-%dT%H:%M:%SZ")
        return Step(command, f"{why} (the job then sees forced=true and ScheduleTime {upcoming})")

    def gcloud_run(self, job: ScheduledJob) -> str:
        """gcloud's "Force run" of the job, naming where it is."""
        return (
            f"gcloud scheduler jobs run {job.scheduler_job} --location={job.location} "
            f"--project={self.team.project}"
        )


def next_steps(situation: Situation, schedule_time: str | None, copy: dict[str, Any] | None) -> list[Step]:
    """What the operator can do about the run (`schedule_time`: the time it was asked by, for a
    run with no record; `copy`: its dead-letter copy as `copy_of` found it)."""
    record, job = situation.record, situation.job
    if record is None:
        return _never_delivered(situation, schedule_time)
    if record.get(RERUN_OF_FIELD):
        return [
            Step(
                f"runonce show {record[RERUN_OF_FIELD]} {situation.where}",
                "this forced delivery carried an operator's re-run of that run: its record says how it went",
            )
        ]
    status = record.get("status")
    scheduled = job if isinstance(job, ScheduledJob) and not record.get("forced") else None
    if status == RunStatus.IN_PROGRESS.value:
        return _in_progress(situation, scheduled)
    steps: list[Step] = []
    if isinstance(job, EventJob):
        steps += _dead_letter(situation, job, copy)
    if scheduled is not None and status == RunStatus.FAILED.value:
        steps.append(
            situation.rerun(
                scheduled,
                record["schedule_time"],
                "run it again once the cause is fixed (its history is kept)",
            )
        )
    elif scheduled is not None and status == RunStatus.COMPLETED.value:
        steps.append(
            situation.rerun(
                scheduled,
                record["schedule_time"],
                "only if its effect must happen again: it runs once more, its history kept",
                insist=True,
            )
        )
    elif scheduled is not None and status == RunStatus.SKIPPED.value:
        steps.append(
            situation.rerun(
                scheduled,
                record["schedule_time"],
                f"run it now: it was skipped while run {record.get(SKIPPED_FOR_FIELD)} of the job was in "
                "progress (overlap skip), so its job never ran",
            )
        )
    elif isinstance(job, ScheduledJob) and record.get("forced") and status in _FORCED_AGAIN:
        steps.append(_forced_again(situation, job, record))
    return steps or [Step(None, f"nothing to do: the run {status}")]


_FORCED_AGAIN = (RunStatus.FAILED.value, RunStatus.SKIPPED.value)
"""A forced run in these states can be run again only as a new forced run."""


def _never_delivered(situation: Situation, schedule_time: str | None) -> list[Step]:
    job = situation.job
    if not isinstance(job, ScheduledJob) or schedule_time is None:
        return [
            Step(
                None,
                "no record: never delivered, not yet, expired (its TTL), or not a run of this team. "
                f"`runonce runs {situation.where}` lists the runs; a scheduled run without a record "
                "is shown by `runonce show --team T --job JOB --time TIME`",
            )
        ]
    moment = parse_instant(schedule_time).utc
    if moment not in expected_times(job.schedule, job.time_zone, moment - timedelta(seconds=1), moment):
        return [
            Step(
                None,
                f"{schedule_time} is not a run of job {job.name} ({job.schedule!r} in {job.time_zone}), "
                f"so no run has that key: `runonce runs {situation.where} --job {job.name}` lists its runs",
            )
        ]
    if moment > situation.now:
        return [Step(None, f"not due yet: the run is at {schedule_time}")]
    if situation.note is not None:
        return [_waited_out(situation, job, schedule_time, situation.note)]
    why = (
        "no record: Scheduler never delivered this run, or not yet (it may still be retrying; check the "
        "Scheduler job's logs: paused, deleted, its deliveries refused). If its work is still wanted, "
        "backfill exactly this run: a forced delivery runs it under its own key (a late delivery of it "
        "is then its duplicate)"
    )
    return [situation.backfill(job, schedule_time, why + _expired_caveat(job, moment, situation.now))]


def _waited_out(situation: Situation, job: ScheduledJob, schedule_time: str, note: dict[str, Any]) -> Step:
    """The step for a `wait` job's run answered 409 `waiting` until its retries ran out."""
    holder = str(note.get("waiting_for") or "?")
    why = (
        f"waited out: each delivery of this run since {schedule_time} was answered 409 waiting for run "
        f"{holder} of the job, until Scheduler's retries ran out; it never ran. Backfill exactly this run"
    )
    held = situation.store.read(holder) if note.get("waiting_for") else None
    if (
        held is not None
        and held.get("status") == RunStatus.IN_PROGRESS.value
        and lease_live(held, situation.now)
    ):
        command = situation.backfill_command(job, schedule_time)
        return Step(
            None,
            f"wait: run {holder} still holds the job until {held.get('lease_expires')}, so a delivery of "
            f"this run now is answered 409 waiting again; after it, `{command}`",
        )
    return situation.backfill(job, schedule_time, why)


def _expired_caveat(job: ScheduledJob, moment: datetime, now: datetime) -> str:
    """A warning for a run older than its job's retention, whose record may have expired."""
    if now - moment <= timedelta(seconds=job.retention_seconds):
        return ""
    return (
        f"; but it is older than the job's retention ({job.retention_seconds} s): had it run, its "
        "record could have expired, so backfill it only if you know it did not run"
    )


def _in_progress(situation: Situation, scheduled: ScheduledJob | None) -> list[Step]:
    record = situation.record
    assert record is not None
    if lease_live(record, situation.now):
        return [
            Step(
                None,
                f"wait: attempt {record.get('attempts')} holds the run until {record.get('lease_expires')}",
            )
        ]
    steps = []
    if not _released(record):
        steps.append(
            Step(
                f"runonce release {situation.key} {situation.where}",
                "end the dead attempt's claim, so the run's next delivery takes it over at once",
            )
        )
    if scheduled is not None:
        steps.append(
            situation.rerun(
                scheduled,
                record["schedule_time"],
                "if no delivery is coming (Scheduler's retries ran out), run it again",
            )
        )
    return steps or [
        Step(None, "released: the run's next delivery takes it over; none comes once its retries end")
    ]


def _released(record: dict[str, Any]) -> bool:
    """Whether the attempt holding the run now was released already."""
    actions = record.get(ACTIONS_FIELD) or []
    last = actions[-1] if actions else {}
    return last.get("action") == RELEASE and (last.get("detail") or {}).get("attempt_id") == record.get(
        "attempt_id"
    )


def _forced_again(situation: Situation, job: ScheduledJob, record: dict[str, Any]) -> Step:
    carried = parse_instant(record["schedule_time"]).utc
    if carried > situation.now:
        return Step(
            None,
            f"wait until {record['schedule_time']}, the next scheduled run: a forced run cannot be "
            "re-run, and another forced run before that time would be answered as this one's duplicate; "
            f"after it, `{situation.gcloud_run(job)}` runs the job as a new forced run",
        )
    return situation.force(job, "run the job again as a new forced run (a forced run cannot be re-run)")


def _dead_letter(situation: Situation, job: EventJob, copy: dict[str, Any] | None) -> list[Step]:
    record = situation.record
    assert record is not None
    copy_id = record.get(DEAD_LETTER_MESSAGE_ID_FIELD)
    if not copy_id:
        if record.get(DEAD_LETTER_FAILED_AT_FIELD):
            return [
                Step(
                    None,
                    "its dead-letter copy could not be published; the event stays unacknowledged and its "
                    "next delivery forwards it: check the dead-letter topic's publisher grant",
                )
            ]
        return []
    runs = f"runonce runs {situation.where} --job {job.name}"
    again = f"runonce replay {copy_id} {situation.where} --again"
    last = replay.last_step(record)
    detail = (last or {}).get("detail") or {}
    if copy is None:
        if last is not None and last["action"] == replay.PUBLISHED:
            return [
                Step(
                    runs,
                    f"replayed at {last.get('at')} by {last.get('by')} as message "
                    f"{detail.get('message_id')}, its copy acknowledged: the replayed event is a run of "
                    "its own, listed here",
                )
            ]
        return [
            Step(
                None,
                f"its dead-letter copy {copy_id} is not in {job.dead_letter_subscription} "
                "(acknowledged, past the subscription's retention, or held by a replay for a minute): "
                "nothing to replay",
            )
        ]
    if copy.get("unavailable") or copy.get("unreadable"):
        return [Step(None, f"copy {copy_id}: {copy.get('unavailable') or copy.get('unreadable')}")]
    command = f"runonce replay {copy_id} {situation.where}"
    if last is None or last["action"] == replay.FAILED:
        return [
            Step(command, "publish the event back once the cause is fixed; the copy is then acknowledged")
        ]
    if last["action"] == replay.PUBLISHED:
        if detail.get("copy") == copy_id:
            return [
                Step(command, "its replay was published but the copy not acknowledged: this acknowledges it")
            ]
        return [Step(again, f"the event was replayed already (message {detail.get('message_id')}): again")]
    return [
        Step(
            runs, f"a replay began at {last.get('at')} and was never confirmed: look for the replayed event"
        ),
        Step(again, "only if the replayed event did not run: publish it again"),
    ]


def detail(
    team: TeamView,
    store: Store,
    key: str,
    record: dict[str, Any] | None,
    subscriber: Callable[[], Any],
    now: datetime,
    asked: tuple[ScheduledJob, str] | None = None,
    states: Callable[[TeamView, list[ScheduledJob | EventJob]], dict[str, JobState]] | None = None,
) -> dict[str, Any]:
    """Everything `show` tells about run `key` (`subscriber` makes a Pub/Sub client if one is
    needed; `asked`: the job and schedule time the operator named it by, if they did; `states`
    reads what Scheduler says of a scheduled job, `operate.paused.job_states`)."""
    job = job_of(team, record) if record else (asked[0] if asked else None)
    copy = copy_of(subscriber, job, record) if isinstance(job, EventJob) and record else None
    note = store.read(waiting_note(key)) if record is None and asked else None
    situation = Situation(team, store, key, record, job, now, note)
    state = states(team, [job])[job.name] if states is not None and isinstance(job, ScheduledJob) else None
    paused = "the job is paused (`scheduler_job_state` says since when, by whom and why): no tick runs until"
    resume = [Step(state.resume, f"{paused} this resumes it")] if state is not None and state.resume else []
    return {
        "key": key,
        "team": team.name,
        "job": job.name if job else None,
        "status": _status(record, note),
        "cause": runs.cause(record) if record else None,
        "record": record,
        "waited_out": _waiting(note, asked[1]) if note and asked else None,
        HISTORY_FIELD: (record or {}).get(HISTORY_FIELD) or [],
        ACTIONS_FIELD: (record or {}).get(ACTIONS_FIELD) or [],
        "dead_letter_copy": copy,
        "scheduler_job_state": state.json() if state is not None else None,
        "next": [
            step.json() for step in [*resume, *next_steps(situation, asked[1] if asked else None, copy)]
        ],
    }


def _status(record: dict[str, Any] | None, note: dict[str, Any] | None) -> str:
    """The run's status as `runonce runs` lists it (`missing` or `waited_out` without a record)."""
    if record is not None:
        return str(record.get("status"))
    return runs.WAITED_OUT if note is not None else runs.MISSING


def _waiting(note: dict[str, Any], schedule_time: str) -> dict[str, Any]:
    """What a waited-out run's note says: the run it waited for, since when, and when the note goes."""
    return {
        "waiting_for": note.get("waiting_for"),
        "since": schedule_time,
        "note_expires": note.get(EXPIRE_AT_FIELD),
    }
