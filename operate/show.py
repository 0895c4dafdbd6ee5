"""`runonce show`: one run's whole record, its dead-letter copy, and what the operator can do next."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any

from operate import dead_letters
from operate.clients import Unavailable
from operate.team import EventJob, ScheduledJob, TeamView
from runonce.contract import ACTIONS_FIELD, DEAD_LETTER_MESSAGE_ID_FIELD, HISTORY_FIELD, RunStatus


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


def rerun_command(team: TeamView, job: ScheduledJob | EventJob | None, schedule_time: Any) -> str:
    """The `runonce rerun` command for a scheduled run (placeholders where it is not known)."""
    name = job.name if isinstance(job, ScheduledJob) else "JOB"
    return f"runonce rerun --team {team.name} --job {name} --time {schedule_time or 'TIME'}"


def next_steps(
    team: TeamView, key: str, record: dict[str, Any] | None, now: datetime, rerun: str
) -> list[str]:
    """What the operator can do about the run, as commands (`rerun`: its re-run command)."""
    where = f"--team {team.name}"
    if record is None:
        return [
            "no record: Scheduler never delivered this run, or not yet. Check the Scheduler job's "
            f"logs; `{rerun}` makes it run"
        ]
    status = record.get("status")
    if status == RunStatus.IN_PROGRESS.value:
        lease = record.get("lease_expires")
        if lease is not None and lease > now:
            return [f"wait: attempt {record.get('attempts')} holds the run until {lease.isoformat()}"]
        return [
            f"runonce release {key} {where}: end the dead attempt's claim, so the next delivery runs it",
            f"if no delivery is coming (Scheduler's retries ran out), `{rerun}` makes it run",
        ]
    steps = []
    if record.get(DEAD_LETTER_MESSAGE_ID_FIELD):
        steps.append(
            f"runonce replay {record[DEAD_LETTER_MESSAGE_ID_FIELD]} {where}: publish the event again, once"
        )
    if status == RunStatus.FAILED.value and "schedule_time" in record:
        steps.append(f"{rerun}: run it again once the cause is fixed (its history is kept)")
    return steps or ["nothing to do: the run completed"]


def detail(
    team: TeamView,
    key: str,
    record: dict[str, Any] | None,
    subscriber: Callable[[], Any],
    now: datetime,
    asked: tuple[ScheduledJob, str] | None = None,
) -> dict[str, Any]:
    """Everything `show` tells about run `key` (`subscriber` makes a Pub/Sub client if one is
    needed; `asked`: the job and schedule time the operator named it by, if they did)."""
    job = job_of(team, record) if record else (asked[0] if asked else None)
    schedule_time = (record or {}).get("schedule_time") or (asked[1] if asked else None)
    return {
        "key": key,
        "team": team.name,
        "job": job.name if job else None,
        "record": record,
        HISTORY_FIELD: (record or {}).get(HISTORY_FIELD) or [],
        ACTIONS_FIELD: (record or {}).get(ACTIONS_FIELD) or [],
        "dead_letter_copy": copy_of(subscriber, job, record)
        if isinstance(job, EventJob) and record
        else None,
        "next": next_steps(team, key, record, now, rerun_command(team, job, schedule_time)),
    }
