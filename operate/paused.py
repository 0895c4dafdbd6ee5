"""Whether a scheduled job's Cloud Scheduler job runs its ticks, for `runonce runs` and `show`.

One `jobs.get` per job (the operators hold roles/cloudscheduler.viewer). An ENABLED job says
nothing. A PAUSED job says since when, by whom and why, and the `runonce resume` command that
starts it again: the watchdog's pause record (`pause:<run key>` in its own store, written by
`runonce.scheduler.watchdog.Pausing`) when one matches the current pause, its `at` and failed runs;
otherwise "paused in Scheduler", with the job's `userUpdateTime` given for what it is, the time of
the job's last change, which Google's reference does not promise is the pause (docs/operate.md).
Any other answer (the job deleted, no permission, Scheduler unreachable, a DISABLED or
UPDATE_FAILED job) is one line saying what could not be told; the runs are listed all the same.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, field, replace
from datetime import UTC, datetime, timedelta
from typing import Any

from google.api_core import exceptions as gexc

from operate import clients
from operate.keys import SHORT_KEY
from operate.rerun import SCHEDULER_API, SCHEDULER_URL_VARIABLE, SchedulerApi, Target, Unreadable
from operate.team import BadInput, EventJob, ScheduledJob, TeamView
from runonce._instant import parse_instant
from runonce.contract import STATUS_FIELD, RunStatus
from runonce.core.errors import RunonceError
from runonce.core.store import Store, StoredResult
from runonce.scheduler.watchdog import PAUSE_PREFIX, PAUSED_FIELD

ENABLED, PAUSED = "ENABLED", "PAUSED"
BY_WATCHDOG = "watchdog_record"
"""`since_from` of a pause the watchdog recorded: `paused_since` is the record's `at`."""
BY_UPDATE = "user_update_time"
"""`since_from` of any other pause: `paused_since` is the job's `userUpdateTime`, its last change."""
MATCH_BEFORE = timedelta(minutes=1)
MATCH_AFTER = timedelta(minutes=6)
"""A watchdog record is the current pause when the job's `userUpdateTime` is at most a minute
before its `at` or six after: a tick's `at` is its start, and it calls `jobs.pause` within its
300 s timeout; the minute is for the function's and Scheduler's clocks."""
_ERROR_CHARS = 160
_STATES = {
    "DISABLED": "Scheduler disabled it after an error (a user cannot set this state) and runs none of "
    "its ticks: its error is in the job's page in the console",
    "UPDATE_FAILED": "its last update failed; Scheduler's reference says to retry the update until it "
    "succeeds: deploy the team's stack again",
}


@dataclass(frozen=True)
class JobState:
    """What Scheduler says of one scheduled job's Scheduler job, and the line that says it."""

    job: str
    scheduler_job: str
    state: str | None
    """Scheduler's `state` (ENABLED, PAUSED, DISABLED, UPDATE_FAILED), None if it was not read."""
    line: str
    """The one line above the listing ("" for an ENABLED job)."""
    paused_since: str | None = None
    """RFC 3339: the watchdog's pause time, or the job's `userUpdateTime` (`since_from` says which)."""
    since_from: str | None = None
    paused_by: str | None = None
    """Who paused it, when the watchdog's record says (`runonce-watchdog`)."""
    failed_runs: list[str] = field(default_factory=list)
    """The run keys whose failures made the watchdog pause it, oldest first."""
    user_update_time: str | None = None
    resume: str | None = None
    """The command that starts a paused job again."""
    unknown: str | None = None
    """Why the state could not be told (no answer, an error, or a record that could not be read)."""

    def json(self) -> dict[str, Any]:
        """The state as `--json` carries it."""
        return asdict(self)


def job_states(team: TeamView, jobs: Iterable[ScheduledJob | EventJob]) -> dict[str, JobState]:
    """The state of each scheduled one of `jobs`, by job name (event jobs have no Scheduler job)."""
    api = SchedulerApi(os.environ.get(SCHEDULER_URL_VARIABLE) or SCHEDULER_API)
    watchdog = functools.cache(lambda: clients.watchdog_store(team))
    return {job.name: job_state(api, watchdog, team, job) for job in jobs if isinstance(job, ScheduledJob)}


def job_state(
    api: SchedulerApi, watchdog: Callable[[], Store], team: TeamView, job: ScheduledJob
) -> JobState:
    """What Scheduler says of `job` (`watchdog` opens the watchdog's store, read only for a PAUSED
    job); never raises for an answer Scheduler or the store gives."""
    target = Target(
        team.name, job.name, job.scheduler_job, team.project, job.location, job.schedule, job.time_zone
    )
    named = f"job {job.name} (Scheduler job {job.scheduler_job})"
    try:
        found = api.job(target)
    except (Unreadable, ValueError) as exc:  # ValueError: a 2xx answer that is not JSON (a front end's page)
        return JobState(job.name, job.scheduler_job, None, f"{named}: {_unreadable(exc)}", unknown=str(exc))
    state = found.get("state")
    if state == ENABLED:
        return JobState(job.name, job.scheduler_job, state, "")
    if state == PAUSED:
        return _paused(watchdog, team, job, named, found)
    said = _STATES.get(str(state), "a state runonce does not know: look at the job in the console")
    return JobState(
        job.name,
        job.scheduler_job,
        str(state) if state else None,
        f"{named} is {state or 'in no state Scheduler named'}: {said}",
        unknown=None if state in _STATES else f"state {state!r}",
    )


def _unreadable(exc: Unreadable | ValueError) -> str:
    """The line of a `jobs.get` that did not answer the job."""
    status = exc.status if isinstance(exc, Unreadable) else None
    if status == 404:
        return (
            "Cloud Scheduler has no such job (404: deleted, or not deployed): none of its ticks run "
            "until the team's stack is deployed again"
        )
    if status == 403:
        return (
            "could not tell whether it is paused: no permission to read it (403; `jobs.get` needs "
            "roles/cloudscheduler.viewer on the project)"
        )
    said = str(exc) if isinstance(exc, Unreadable) else f"Cloud Scheduler's answer is not JSON ({exc})"
    return f"could not tell whether it is paused: {_one_line(said)}"


def _one_line(text: str) -> str:
    """An error's text on one line, at most `_ERROR_CHARS` long."""
    text = " ".join(text.split())
    return text if len(text) <= _ERROR_CHARS else text[: _ERROR_CHARS - 1] + "…"


def _paused(
    watchdog: Callable[[], Store], team: TeamView, job: ScheduledJob, named: str, found: dict[str, Any]
) -> JobState:
    updated = _rfc3339(found.get("userUpdateTime"))
    resume = f"runonce resume --team {team.name} --job {job.name}"
    until = f"none of its ticks run until `{resume}`"
    unread: str | None = None
    try:
        record = pause_record(watchdog(), job, updated)
    except (BadInput, RunonceError, gexc.GoogleAPICallError, gexc.RetryError, OSError) as exc:
        record, unread = None, _one_line(f"{type(exc).__name__}: {exc}")
    base = JobState(job.name, job.scheduler_job, PAUSED, "", user_update_time=updated, resume=resume)
    if record is not None:
        failed = [key for key in str(record.get("failed_runs") or "").split(",") if key]
        by = str(record.get("paused_by") or "the watchdog")
        since = _rfc3339(record.get("at"))
        why = (
            f"after {record.get(PAUSED_FIELD) or len(failed)} consecutive failed runs (scheduled "
            f"{record.get('first_failed_time')} to {record.get('last_failed_time')}; the last "
            f"{failed[-1][:SHORT_KEY] if failed else '?'})"
        )
        line = f"{named} is PAUSED since {since} by {by} {why}: {until}"
        return replace(
            base, line=line, paused_since=since, since_from=BY_WATCHDOG, paused_by=by, failed_runs=failed
        )
    whose = (
        f"the watchdog's record could not be read ({unread})"
        if unread
        else "no pause record of the watchdog matches it"
    )
    line = (
        f"{named} is PAUSED in Scheduler ({whose}); the job was last changed at "
        f"{updated or 'an unknown time'} (its userUpdateTime: its last update of any kind, which may "
        f"be the pause): {until}"
    )
    return replace(base, line=line, paused_since=updated, since_from=BY_UPDATE, unknown=unread)


def pause_record(store: Store, job: ScheduledJob, updated: str | None) -> dict[str, Any] | None:
    """The watchdog's completed pause of `job` that is the current pause (its `at` close to the
    job's `userUpdateTime`, `updated`: `MATCH_BEFORE`, `MATCH_AFTER`), the latest if several; None
    if none is."""
    if updated is None:
        return None
    changed = parse_instant(updated).utc
    matching: list[tuple[datetime, dict[str, Any]]] = []
    for key, record in store.find({"job": job.name, "scheduler_job": job.scheduler_job}).items():
        if not key.startswith(PAUSE_PREFIX):
            continue
        done = (
            StoredResult.from_record(dict(record)).value
            if record.get(STATUS_FIELD) == RunStatus.COMPLETED.value
            else None
        )
        if not isinstance(done, dict) or not done.get("at"):
            continue
        at = parse_instant(str(done["at"])).utc
        if at - MATCH_BEFORE <= changed <= at + MATCH_AFTER:
            matching.append((at, done))
    return max(matching, key=lambda pair: pair[0])[1] if matching else None


def _rfc3339(value: Any) -> str | None:
    """`value` (an RFC 3339 time) in UTC to the second, as the listing writes times; None if it is
    none."""
    try:
        return parse_instant(str(value)).utc.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ") if value else None
    except ValueError:
        return None
