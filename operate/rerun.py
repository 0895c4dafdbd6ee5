"""`runonce rerun`: run one finished scheduled run again, through Cloud Scheduler (docs/rerun.md).

The functions take internal traffic only, so the command cannot call one. It writes a re-run
request in the team's ledger (refused, with nothing written, for a run with no record, in
progress, completed without `--insist`, or while the job has a pending request), then asks
Cloud Scheduler to run the job now (`jobs.run`); the forced delivery that follows consumes the
request and runs the finished run again under its own key, keeping its history. If Scheduler
refuses the call, the request is withdrawn (only if still pending).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, NoReturn
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

import click
from cronsim import CronSimError

from operate import clients
from operate import team as team_file
from operate.team import BadInput
from runonce import _clock
from runonce._instant import parse_instant
from runonce.core.errors import StoreError
from runonce.core.requests import RerunRefused, RerunRequest
from runonce.core.settings import DEFAULT_FORCED_SKEW_SECONDS
from runonce.core.store import REQUEST_STATE_FIELD, RequestState, Store
from runonce.scheduler.exclusion import JobCalendar
from runonce.scheduler.expected import cron_instant, expected_times, forced_key, next_time, scheduled_key
from runonce.scheduler.keys import rerun_slot
from stacks.config.team import Job, Team
from stacks.naming import scheduler_job_name

REQUEST_TTL = timedelta(minutes=10)
"""How long a request may be consumed: a command that dies before `jobs.run` holds the job's
next forced run (and any second request) at most this long."""
SCHEDULER_API = "https://cloudscheduler.googleapis.com"
SCHEDULER_URL_VARIABLE = "RUNONCE_SCHEDULER_BASE_URL"
"""Replaces Cloud Scheduler's host, to point the command at a local stand-in (no credentials then)."""
SCHEDULER_TIMEOUT_SECONDS = 30.0
REFUSED_EXIT = 2
"""Exit status of a refusal or bad input: nothing was changed."""
FAILED_EXIT = 1
"""Exit status when Scheduler did not dispatch the run (the request is withdrawn)."""


class Refused(Exception):
    """The re-run is refused (bad input, or the ledger refuses the request); nothing changed."""


class NotDispatched(Exception):
    """Cloud Scheduler did not run the job; `withdrawn` says whether the request was withdrawn,
    `status` the HTTP status Scheduler answered (None: no answer)."""

    def __init__(self, message: str, withdrawn: bool, status: int | None = None):
        super().__init__(message)
        self.withdrawn = withdrawn
        self.status = status


class Unreadable(Exception):
    """Cloud Scheduler did not answer a read of the job (`jobs.get`): nothing was changed.
    `status`: the HTTP status it answered (None: it could not be reached)."""

    def __init__(self, message: str, status: int | None = None):
        super().__init__(message)
        self.status = status


@dataclass(frozen=True)
class Target:
    """One scheduled job of a team, as Scheduler and the ledger name it."""

    team: str
    job: str
    scheduler_job: str
    project: str
    location: str
    schedule: str
    time_zone: str
    calendar: JobCalendar | None = None
    """The job's calendar (`Job.calendar`): backfill never starts a tick it excludes."""

    @classmethod
    def of(cls, team: Team, job: Job) -> Target:
        """The job `job` of `team`, with the names the stack gives it."""
        return cls(
            team.name,
            job.name,
            scheduler_job_name(team.name, job.name),
            team.project,
            team.scheduler_region(job.name),
            job.schedule,
            job.time_zone,
            job.calendar,
        )

    @property
    def slot(self) -> str:
        """The job's re-run request record."""
        return rerun_slot(self.project, self.location, self.scheduler_job)

    def run_key(self, schedule_time: datetime) -> str:
        """The run key of the job's scheduled run at `schedule_time`."""
        return scheduled_key(self.scheduler_job, schedule_time, self.project, self.location)


@dataclass(frozen=True)
class Requested:
    """A request written and its run dispatched; `state` is what the slot said after waiting."""

    request: RerunRequest
    state: str
    consumed_by: str | None


def request_rerun(
    store: Store,
    target: Target,
    schedule_time: datetime,
    by: str,
    insist: bool,
    dispatch: Callable[[Target], None],
    wait_seconds: float = 0.0,
    forced_skew: timedelta = timedelta(seconds=DEFAULT_FORCED_SKEW_SECONDS),
) -> Requested:
    """Request the re-run of `target`'s run at `schedule_time`, then `dispatch` the job (jobs.run),
    and wait up to `wait_seconds` for a delivery to consume the request.

    Refused (nothing written) for a time that is not one of the job's runs, when the job's next
    forced delivery could not consume the request (it would count as the scheduled run, or as a
    duplicate of a forced run already recorded), or when the ledger refuses the request.
    NotDispatched when `dispatch` raises; the request is then withdrawn if still pending.
    """
    now = _clock.now()
    if schedule_time.tzinfo is None:
        raise Refused("--time needs a UTC offset, e.g. 2026-11-29T03:00:00Z")
    next_run(target, now)  # the team file's time zone and schedule evaluate, or BadInput naming them
    when = cron_instant(schedule_time)
    if when.utc != schedule_time or when.utc > now or not _is_run(target, when.utc):
        raise Refused(
            f"--time: {when.rfc3339()} is not a past run of job {target.job!r} (schedule "
            f"{target.schedule!r} in {target.time_zone}); list its runs with "
            f"`runonce runs --team {target.team} --job {target.job}`"
        )
    busy = interval_refusal(store, target, now, forced_skew)
    if busy is not None:
        raise Refused(f"{busy}. Run the command again after that time")
    fields: dict[str, Any] = {"by": by, "schedule_time": when.rfc3339()}
    fields["scheduler_job"] = target.scheduler_job
    try:
        request = store.request_rerun(target.slot, target.run_key(when.utc), fields, insist, REQUEST_TTL)
    except RerunRefused as exc:
        raise Refused(str(exc)) from None
    try:
        dispatch(target)
    except NotDispatched as exc:
        withdrawn = store.withdraw_rerun(target.slot, request.request_id)
        raise NotDispatched(str(exc), withdrawn) from None
    return waited(store, request, wait_seconds)


def next_run(target: Target, now: datetime) -> datetime:
    """The job's next scheduled time after `now`; BadInput naming the team file's field when its
    time zone or schedule cannot be evaluated (as `runonce runs` refuses that file)."""
    try:
        ZoneInfo(target.time_zone)
    except (ZoneInfoNotFoundError, ValueError) as exc:
        raise _unevaluable(target, "time_zone", target.time_zone, exc) from None
    try:
        return next_time(target.schedule, target.time_zone, now)
    except (CronSimError, ValueError) as exc:  # ValueError: a cron that never fires (30 February)
        raise _unevaluable(target, "schedule", target.schedule, exc) from None


def _unevaluable(target: Target, field: str, value: str, exc: Exception) -> BadInput:
    return BadInput(
        "--team",
        f"job {target.job}'s {field} {value!r} in team {target.team}'s file cannot be evaluated "
        f"({exc}): fix the file; `make synth` checks it",
    )


def _is_run(target: Target, moment: datetime) -> bool:
    """Whether `moment` is one of the job's schedule times (cronsim's, as Scheduler fires them)."""
    try:
        return moment in expected_times(
            target.schedule, target.time_zone, moment - timedelta(seconds=1), moment
        )
    except OverflowError:  # a time at the calendar's edge (year 1): no ledger keeps such a run
        return False


def interval_refusal(
    store: Store,
    target: Target,
    now: datetime,
    forced_skew: timedelta = timedelta(seconds=DEFAULT_FORCED_SKEW_SECONDS),
) -> str | None:
    """Why a forced delivery of `target` dispatched `now` would not run as a forced run of its
    own (it would count as the next scheduled run, or as a duplicate of a forced run already
    recorded before that run), or None: what `rerun` and `gcloud scheduler jobs run` both rely on."""
    upcoming = next_run(target, now)
    if upcoming - now <= forced_skew:
        return (
            f"the job's next scheduled run is at {cron_instant(upcoming).rfc3339()}, less than "
            f"{forced_skew.total_seconds():.0f} s away: a forced delivery now counts as that run"
        )
    if store.exists(forced_key(target.scheduler_job, upcoming, target.project, target.location)):
        return (
            f"a forced run of job {target.job!r} before {cron_instant(upcoming).rfc3339()} already has "
            "a record: Scheduler's delivery would carry its headers and be answered as its duplicate"
        )
    return None


def waited(store: Store, request: RerunRequest, wait_seconds: float) -> Requested:
    """The request's state once a delivery consumed it, or after `wait_seconds`."""
    deadline = time.monotonic() + wait_seconds
    while True:
        slot = store.read(request.slot) or {}
        state = slot.get(REQUEST_STATE_FIELD, "") if slot.get("request_id") == request.request_id else ""
        if state != RequestState.PENDING.value or time.monotonic() >= deadline:
            return Requested(request, state or "replaced", slot.get("consumed_by"))
        time.sleep(min(1.0, max(0.0, deadline - time.monotonic())))


class SchedulerApi:
    """Cloud Scheduler's `jobs.run`, over REST: `POST /v1/{name}:run` with an empty body.

    On Google's host the call carries the application default credentials; on another base URL
    (a local stand-in, `RUNONCE_SCHEDULER_BASE_URL`) it carries none.
    """

    def __init__(self, base_url: str = SCHEDULER_API, timeout: float = SCHEDULER_TIMEOUT_SECONDS):
        self._base_url = base_url.rstrip("/")
        self._timeout = timeout

    def _session(self) -> Any:
        if self._base_url != SCHEDULER_API:
            import requests

            return requests.Session()
        import google.auth
        from google.auth.exceptions import DefaultCredentialsError
        from google.auth.transport.requests import AuthorizedSession

        try:
            credentials, _ = google.auth.default(scopes=["https://www.googleapis.com/auth/cloud-platform"])
        except DefaultCredentialsError as exc:
            raise NotDispatched(
                f"no credentials to call Cloud Scheduler ({exc}); "
                "run `gcloud auth application-default login`",
                False,
            ) from None
        return AuthorizedSession(credentials)

    def job(self, target: Target) -> dict[str, Any]:
        """The Scheduler Job resource (`jobs.get`, `GET /v1/{name}`); Unreadable if Scheduler
        answers an error or cannot be reached."""
        try:
            found = self._call("get", target, "", "read").json()
        except NotDispatched as exc:
            raise Unreadable(str(exc), exc.status) from None
        return found if isinstance(found, dict) else {}

    def run(self, target: Target) -> None:
        """Run the job now; NotDispatched (not withdrawn yet) if Scheduler answers an error or
        cannot be reached."""
        self._call("post", target, ":run", "run")

    def resume(self, target: Target) -> dict[str, Any]:
        """Resume the paused job (`jobs.resume`, `POST /v1/{name}:resume`): the Job resource
        Scheduler answers; NotDispatched if Scheduler answers an error or cannot be reached."""
        found = self._call("post", target, ":resume", "resume").json()
        return found if isinstance(found, dict) else {}

    def _call(self, method: str, target: Target, verb: str, doing: str) -> Any:
        import requests

        name = f"projects/{target.project}/locations/{target.location}/jobs/{target.scheduler_job}"
        try:
            answer = getattr(self._session(), method)(
                f"{self._base_url}/v1/{name}{verb}", timeout=self._timeout
            )
        except requests.RequestException as exc:
            raise NotDispatched(f"Cloud Scheduler could not be reached for {name}: {exc}", False) from None
        if answer.status_code >= 300:
            raise NotDispatched(
                f"Cloud Scheduler refused to {doing} {name}: {answer.status_code} {answer.text[:500]}",
                False,
                answer.status_code,
            )
        return answer


def answer_failure(command: str, exc: Exception, after: str = "") -> NoReturn:
    """End `runonce COMMAND` on `exc`: bad input exits 2 (click's usage error), a refusal exits 2
    saying nothing changed, a Scheduler call that failed exits 1 (0 if a delivery consumed the
    request all the same), a ledger that cannot be used exits 1. `after` is said of a failure."""
    if isinstance(exc, BadInput):
        raise click.UsageError(str(exc))
    if isinstance(exc, Refused):
        click.echo(f"runonce {command}: refused: {exc} (nothing changed)", err=True)
        raise click.exceptions.Exit(REFUSED_EXIT)
    if isinstance(exc, NotDispatched):
        kept = "the request is withdrawn" if exc.withdrawn else "a delivery consumed the request meanwhile"
        click.echo(f"runonce {command}: {exc}; {kept}{after}", err=True)
        raise click.exceptions.Exit(FAILED_EXIT if exc.withdrawn else 0)
    click.echo(f"runonce {command}: the ledger cannot be used: {exc}{after}", err=True)
    raise click.exceptions.Exit(FAILED_EXIT)


def find_job(team: Team, name: str) -> Job:
    """The scheduled job `name` of `team`, by its team-file name or its Scheduler job's id (what
    log lines and alerts call it); Refused, naming the team's scheduled jobs, if none."""
    for job in team.scheduled_views:  # function, service and App Engine jobs alike
        if name in (job.name, scheduler_job_name(team.name, job.name)):
            return job
    names = ", ".join(job.name for job in team.scheduled_views) or "none"
    event_job = any(job.name == name for job in team.event_jobs)
    event = " (an event job: only scheduled runs can be re-run)" if event_job else ""
    raise Refused(
        f"--job: team {team.name!r} has no scheduled job {name!r}{event}; its scheduled jobs: {names}"
    )


def _parse_time(text: str) -> datetime:
    """The --time as the library reads a ScheduleTime (an offset required), in UTC; a fraction of
    a second is kept (to the microsecond), so such a time is no run of the schedule's."""
    try:
        instant = parse_instant(text)
    except ValueError as exc:
        raise Refused(f"--time {exc}") from None
    return instant.utc + timedelta(microseconds=instant.nanos // 1000)


@click.command("rerun")
@click.option("--team", "team_name", required=True, help="The team: its name or its file in teams/.")
@click.option("--job", "job_name", required=True, help="The scheduled job, as the team file names it.")
@click.option("--time", "time_text", required=True, help="The run's schedule time (RFC 3339, with offset).")
@click.option("--insist", is_flag=True, help="Re-run a completed run too (its effect happens again).")
@click.option(
    "--by", help="Who you are, for the record (default: the credentials' account; $USER on the emulators)."
)
@click.option(
    "--wait",
    "wait_seconds",
    default=30,
    show_default=True,
    type=click.IntRange(0, 600),
    help="Seconds to wait for the delivery to consume the request.",
)
def rerun(
    team_name: str,
    job_name: str,
    time_text: str,
    insist: bool,
    by: str | None,
    wait_seconds: int,
) -> None:
    """Run one finished run (failed; completed with --insist) again, keeping its history.

    Writes a re-run request in the team's ledger, then asks Cloud Scheduler to run the job now;
    the delivery consumes the request (docs/rerun.md). Exit 2: refused, nothing changed; exit 1:
    Scheduler did not run the job (the request is withdrawn).
    """
    try:
        team = team_file.load(team_name)
        job = find_job(team, job_name)
        target = Target.of(team, job)
        store = clients.store(team, job.retention_seconds)
        api = SchedulerApi(os.environ.get(SCHEDULER_URL_VARIABLE) or SCHEDULER_API)
        done = request_rerun(
            store, target, _parse_time(time_text), clients.operator(by), insist, api.run, wait_seconds
        )
    except (BadInput, Refused, NotDispatched, StoreError) as exc:
        answer_failure("rerun", exc)
    request = done.request
    click.echo(f"re-run of {target.job} at {request.schedule_time} (run {request.key}), by {request.by}")
    if done.state == RequestState.CONSUMED.value:
        click.echo(f"delivered: the forced delivery {done.consumed_by} reopened the run")
    else:
        click.echo(
            f"not delivered yet ({done.state}); the request expires at {request.expires.isoformat()}; "
            f"see `runonce show --team {target.team} --job {target.job} --time {request.schedule_time}`"
        )
