"""`runonce runs`: one row per run of a job in a window.

A scheduled job's rows come from its cron and time zone: every expected time in the window gets
its scheduled run's key (`runonce.scheduler.expected`) and all those records are read in one
batch, with no index; an expected time with no record gets a row that says so. Its forced runs
are found by a query on `job` and `forced` (equality filters alone, which Firestore serves from
its single-field indexes), kept when they were claimed in the window: a forced run carries the
job's *next* scheduled time, so its schedule time says nothing of when it ran. An event job's rows
come from a query on the field naming its subscription (push: `event_source`) or function
(Eventarc: `event_consumer`) and on `claimed_at`, served by the composite index the stack creates.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from typing import Any
from zoneinfo import ZoneInfoNotFoundError

from cronsim import CronSimError

from operate.keys import SHORT_KEY
from operate.team import BadInput, EventJob, ScheduledJob, TeamView
from runonce._instant import parse_instant
from runonce.contract import EXCLUDED_BECAUSE_FIELD, SKIPPED_FOR_FIELD, RunStatus
from runonce.core.store import CAUSE_FIELD, RERUN_OF_FIELD, Store, waiting_note
from runonce.scheduler.expected import expected_times, scheduled_key

MISSING = "missing"
"""The status of an expected run that has no record."""
WAITED_OUT = "waited_out"
"""The status of an expected run that has no record but a waiting note: a run of a `wait` job
answered 409 while another run held the job, never claimed (docs/schedules/overlap.md)."""
NO_RECORD = (MISSING, WAITED_OUT)
"""The statuses of rows without a record (no key to look up)."""
STATUSES = (*(status.value for status in RunStatus), MISSING, WAITED_OUT)
_OUTCOME_CHARS = 200
MAX_EXPECTED = 20_000
"""Expected runs of one job listed at once (two weeks of a job every minute)."""


@dataclass(frozen=True)
class Row:
    """One run as `runonce runs` shows it."""

    job: str
    key: str
    time: datetime | None
    """When the run was due: its schedule time, a forced run's claim (when it happened), or the
    event's time."""
    forced: bool | None
    status: str
    attempts: int | None
    outcome: str
    started: datetime | None
    """When its last attempt claimed it."""
    finished: datetime | None
    duration_seconds: float | None
    event_id: str | None = None
    schedule_time: datetime | None = None
    """The ScheduleTime the run's deliveries carried (a forced run's: the job's next scheduled time)."""
    cause: str = ""
    """What started its last attempt, if not its own delivery: `rerun`, `backfill` or `catch_up`
    (an operator's request or the watchdog's); `forced` for a forced run."""

    def json(self) -> dict[str, Any]:
        """The row as JSON-ready values (times in RFC 3339)."""
        return {
            name: value.isoformat() if isinstance(value, datetime) else value
            for name, value in asdict(self).items()
        }


def scheduled_rows(
    store: Store, team: TeamView, job: ScheduledJob, start: datetime, end: datetime
) -> list[Row]:
    """The expected runs of `job` in (start, end], recorded or not, and its forced runs last
    claimed in [start, end]."""
    keys = {
        scheduled_key(job.scheduler_job, moment, team.project, job.location): moment
        for moment in _expected(job, start, end)
    }
    records = store.read_many(list(keys))
    unrecorded = [key for key in keys if key not in records]
    notes = store.read_many([waiting_note(key) for key in unrecorded]) if unrecorded else {}
    rows = [
        row(job.name, key, records[key], end, team.name)
        if key in records
        else _unrecorded(job, key, moment, notes.get(waiting_note(key)))
        for key, moment in keys.items()
    ]
    for key, record in store.find({"job": job.scheduler_job, "forced": True}).items():
        claimed = record.get("claimed_at")
        if isinstance(claimed, datetime) and start <= claimed <= end:
            rows.append(row(job.name, key, record, end, team.name))
    return sorted(rows, key=lambda r: (r.time or end, r.key))


def _unrecorded(job: ScheduledJob, key: str, moment: datetime, note: dict[str, Any] | None) -> Row:
    """An expected run with no record: excluded by the job's calendar, missing, or waited out when
    a waiting note says so."""
    because = job.calendar.excluded_because(moment) if job.calendar else None
    if because is not None:
        status, outcome = (
            RunStatus.EXCLUDED.value,
            f"no record: excluded by the job's calendar ({because.value})",
        )
    elif note is None:
        status, outcome = MISSING, "no record: never delivered (or not yet)"
    else:
        status = WAITED_OUT
        outcome = (
            f"no record: answered 409 waiting for run {note.get('waiting_for')} until its retries ran out"
        )
    return Row(job.name, key, moment, False, status, None, outcome, None, None, None, schedule_time=moment)


def _expected(job: ScheduledJob, start: datetime, end: datetime) -> list[datetime]:
    try:
        times = expected_times(job.schedule, job.time_zone, start, end)
    except (CronSimError, ValueError, ZoneInfoNotFoundError) as exc:
        raise BadInput(
            "--team",
            f"job {job.name}'s schedule {job.schedule!r} in {job.time_zone!r} cannot be evaluated "
            f"({exc}); `make synth` checks the team file",
        ) from None
    if len(times) > MAX_EXPECTED:
        raise BadInput(
            "--since",
            f"{len(times)} expected runs of {job.name} in the window, more than the {MAX_EXPECTED} "
            "listed at once: give a shorter --since",
        )
    return times


def event_rows(store: Store, team: TeamView, job: EventJob, start: datetime, end: datetime) -> list[Row]:
    """The events of `job` last claimed in [start, end]."""
    found = store.find(job.records, claimed_since=start)
    rows = [row(job.name, key, record, end, team.name) for key, record in found.items()]
    return sorted(rows, key=lambda r: (r.started or end, r.key))


def row(job: str, key: str, record: dict[str, Any], now: datetime, team: str) -> Row:
    """The row of one record of `team`."""
    started, finished = record.get("claimed_at"), record.get("finished_at")
    event_id = record.get("event_id")
    schedule_time = _time(record.get("schedule_time"))
    if event_id is not None:
        time = record.get("event_time")
    else:
        time = started if record.get("forced") else schedule_time
    return Row(
        job=job,
        key=key,
        time=time,
        forced=record.get("forced"),
        status=str(record.get("status")),
        attempts=record.get("attempts"),
        outcome=outcome(record, now, key, team),
        started=started,
        finished=finished,
        duration_seconds=(finished - started).total_seconds() if started and finished else None,
        event_id=event_id,
        schedule_time=schedule_time,
        cause=cause(record),
    )


def cause(record: dict[str, Any]) -> str:
    """What started the run's last attempt (see `Row.cause`); "" for its own scheduled delivery or event."""
    if record.get(CAUSE_FIELD):
        return str(record[CAUSE_FIELD])
    return "forced" if record.get("forced") else ""


def outcome(record: dict[str, Any], now: datetime, key: str, team: str) -> str:
    """What became of run `key` of `team`, in a phrase: its error, its lease, its dead letter, and
    for a run that wants a look the `runonce show` command that shows it."""
    status = record.get("status")
    look = f"`runonce show {key[:SHORT_KEY]} --team {team}`"
    if status == RunStatus.IN_PROGRESS.value:
        lease = record.get("lease_expires")
        if lease is not None and lease > now:
            return f"held by attempt {record.get('attempts')} until {lease.astimezone(UTC).isoformat()}"
        return f"lease ended: its attempt died or its retries ran out: {look}"
    if record.get(RERUN_OF_FIELD):
        rerun_of = record[RERUN_OF_FIELD][:SHORT_KEY]
        return f"carried the re-run of run {rerun_of}: `runonce show {rerun_of} --team {team}`"
    if status == RunStatus.SKIPPED.value:
        holder = str(record.get(SKIPPED_FOR_FIELD) or "?")[:SHORT_KEY]
        return f"skipped: run {holder} of the job was in progress (overlap skip); to re-run it: {look}"
    if status == RunStatus.EXCLUDED.value:
        return f"excluded by the job's calendar ({record.get(EXCLUDED_BECAUSE_FIELD)}): not run"
    parts = [str(record.get("error") or status)]
    if record.get("result_stored") is False:
        parts.append(f"result not stored: {record.get('result_dropped')}")
    if record.get("dead_letter_reason"):
        parts.append(f"dead-lettered ({record['dead_letter_reason']})")
    text = "; ".join(parts)
    return text if len(text) <= _OUTCOME_CHARS else text[: _OUTCOME_CHARS - 1] + "…"


def _time(text: Any) -> datetime | None:
    if not isinstance(text, str):
        return None
    try:
        return parse_instant(text).utc
    except ValueError:
        return None
