"""The watchdog's check: which scheduled runs past their grace did not finish, each reported once.

For every watched job it computes the run's expected schedule times from the cron and time zone
(`expected`: cronsim's DST rule) in a window that starts no earlier than the job existed and ends
one grace (the job's retry window plus its lease) before now, reads each expected run's record in
the team's ledger by its scheduled run key (so a forced run's record, keyed apart, never counts
for the scheduled run), and judges it: no record is `never_delivered`, an in-progress record
whose lease is live is `still_held`, one whose lease ran out with no retry taking it over is
`retried_out`; a completed or failed run is finished (the library logs a failure itself). A run an
operator re-ran (its record keeps a history) is judged as its re-run: not missed while the re-run
holds a live lease, nor within one grace of the re-run's delivery (the forced delivery that carried
it is retried under the job's retry policy), and `retried_out` once that has passed.

The watchdog's ticks are Scheduler deliveries, at least once, and several may run at a time. Each
missed run is reported through a claim of `missed:<run key>` in the watchdog's own store: the tick
that claims it logs the ERROR line and then completes the claim, every other tick finds it held
and stays silent. A tick that dies between its claim and its line leaves a claim whose lease
runs out, and the next tick reports the run; one that dies between its line and the completion
makes that next tick report it a second time: a missed run is never left unreported. The claim
is per run and per operator action on its record: a run an operator released or re-ran that is
missed again afterwards (its re-run died) is reported again, once.

A job with a catch-up window (`catch_up_seconds` in its JSON) has a missed run (never delivered
or retried out) within that window of its schedule time started once instead of reported: the
tick files a catch-up request in the job's re-run slot of the team's ledger (as `runonce
backfill` does, docs/schedules/backfill.md) and asks Cloud Scheduler to run the job (`jobs.run`); the
forced delivery creates the run's claim under its own key, `cause` `catch_up`. Each run gets one
try, ever, through a claim of `catch-up:<run key>` in the watchdog's store: a try that fails is
reported (the missed run's ERROR line, with `catch_up` `failed` and why), a started run whose
delivery never comes is reported once its request's life and the job's grace have passed
(`catch_up` `not_delivered`), and a caught-up run is judged afterwards as a re-run is. A tick
starts at most one catch-up per job (the slot holds one request), and a run outside the window
is reported only. Every run a tick judges is one of the schedule in force: a job's window starts
at its `since`, the time the stack recorded when it last deployed the job's schedule, time zone
or name (stacks/constructs/watchdog.py), so a catch-up never starts a tick of an older schedule
and needs no read of the Scheduler job. A job with a calendar (`calendar` in its JSON, the
X-Runonce-Calendar header's text) expects no run on the ticks it excludes: they are neither
reported nor caught up (their deliveries are recorded `excluded` by the handler).

The module reads and writes the ledger through the `Store` protocol only and imports no Google
library; the function (functions/watchdog) gives it the Firestore stores and Scheduler's REST
API, the tests the in-memory store and stand-ins.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Protocol

from cronsim import CronSim, CronSimError

from .. import _clock
from .._instant import Instant, parse_instant
from .._logs import log_as
from ..contract import (
    ACTIONS_FIELD,
    HISTORY_FIELD,
    MISSED_RUN_FIELD,
    PAUSED_FIELD,
    PROJECT_VARIABLE,
    STATUS_FIELD,
    WATCHDOG_JOBS_VARIABLE,
    WATCHDOG_LEDGER_COLLECTION_VARIABLE,
    WATCHDOG_LEDGER_DATABASE_VARIABLE,
    WATCHDOG_LOCATION_VARIABLE,
    WATCHDOG_LOGGER,
    WATCHDOG_TEAM_VARIABLE,
    MissedRun,
    RunStatus,
)
from ..core.errors import ConfigError, RunonceError
from ..core.store import (
    CAUSE_FIELD,
    CAUSE_REQUEST_FIELD,
    EXPECTED_ATTEMPT_FIELD,
    EXPECTED_STATUS_FIELD,
    Cause,
    Claim,
    Held,
    Store,
    StoredResult,
    waiting_note,
)
from .exclusion import JobCalendar, included, parse_calendar
from .expected import expected_times, scheduled_key
from .keys import rerun_slot

READERS = 16
"""How many ledger reads a tick has in flight at once."""
MISSED_PREFIX = "missed:"
"""The watchdog's claim of a missed run is the run key with this prefix, in its own store."""
_FINISHED = {RunStatus.COMPLETED.value, RunStatus.FAILED.value, RunStatus.SKIPPED.value}
CATCH_UP_PREFIX = "catch-up:"
"""The watchdog's claim of a catch-up is the run key with this prefix, in its own store: one per
run, ever, so a catch-up is tried at most once."""
STARTED_ACTIONS = frozenset(cause.value for cause in Cause)
"""The actions a consumed request records on the run it started (runonce.store._records): re-run,
backfill, catch-up."""
CATCH_UP_FIELD = "catch_up"
"""On a watchdog line about a catch-up: `started`, `failed` (the ERROR line of the missed run,
which the missed-run alert matches as any other) or `not_delivered`."""
CATCH_UP_BY = "runonce-watchdog"
"""Who the catch-up's request names (`cause_by`)."""
CATCH_UP_REQUEST_TTL = timedelta(minutes=10)
"""How long a catch-up's request may be consumed (as `runonce rerun`'s): until then (plus the
job's grace) a run whose catch-up was started is not reported."""
_CATCHABLE = (MissedRun.NEVER_DELIVERED, MissedRun.RETRIED_OUT, MissedRun.WAITED_OUT)
_JOB_FIELDS = ("job", "scheduler_job", "schedule", "time_zone", "grace_seconds", "lookback_seconds", "since")


@dataclass(frozen=True)
class WatchedJob:
    """One scheduled job as the watchdog checks it."""

    job: str
    """The team file's job name (what `runonce show --job` takes)."""
    scheduler_job: str
    """Its Cloud Scheduler job id (`X-CloudScheduler-JobName`), which its run keys hash."""
    schedule: str
    """Its unix-cron expression."""
    time_zone: str
    """The IANA time zone the schedule is evaluated in."""
    grace: timedelta
    """How long after its schedule time a run may still finish: the retry window plus the lease."""
    lookback: timedelta
    """How far back runs are checked: never longer than the ledger keeps the job's records."""
    since: datetime
    """When the job was deployed: no run is expected at or before it."""
    catch_up: timedelta = timedelta(0)
    """Its catch-up window: a run missed less than this after its schedule time is started once
    (never delivered or retried out); 0 reports only."""
    location: str = ""
    """Its Scheduler job's region when it is not the watch's `location` (an App Engine job is in
    the application's region); "" for the watch's."""
    pause_after_failures: int = 0
    """After this many consecutive failed runs the watchdog pauses its Scheduler job once; 0 never."""
    calendar: JobCalendar | None = None
    """Its calendar: the ticks it excludes are not expected (never reported, never caught up)."""


@dataclass(frozen=True)
class Watch:
    """What one team's watchdog checks: its jobs, and the project and location their keys hash."""

    team: str
    project: str
    location: str
    """The team's region: where its Scheduler jobs are, unless a job names its own."""
    jobs: tuple[WatchedJob, ...]

    def location_of(self, job: WatchedJob) -> str:
        """The region of `job`'s Scheduler job, which its run keys hash and `jobs.run` names."""
        return job.location or self.location

    def scheduler_job(self, job: WatchedJob) -> str:
        """The full name of `job`'s Scheduler job, projects/P/locations/L/jobs/J."""
        return f"projects/{self.project}/locations/{self.location_of(job)}/jobs/{job.scheduler_job}"


@dataclass(frozen=True)
class Missed:
    """A scheduled run past its grace that did not finish."""

    job: WatchedJob
    schedule_time: datetime
    run_key: str
    state: MissedRun
    acted: int = 0
    """How many operator actions (releases, re-runs) the run's record holds."""
    attempt_id: str | None = None
    """The attempt its record names (None: no record)."""
    status: str | None = None
    """Its record's status (None: no record)."""
    started_by: str | None = None
    """The request that started its last attempt, if a request did (a re-run, backfill, catch-up)."""

    @property
    def marker(self) -> str:
        """The watchdog's claim of this report: `missed:<run key>`, followed by `:<n>` once the
        record holds n operator actions, so a run missed again after an operator acted is
        reported again."""
        return f"{MISSED_PREFIX}{self.run_key}" + (f":{self.acted}" if self.acted else "")

    @property
    def rfc3339(self) -> str:
        """The schedule time as the record and the delivery write it."""
        return _rfc3339(self.schedule_time)

    def command(self, team: str) -> str:
        """The `runonce` command that shows this run."""
        return f"runonce show --team {team} --job {self.job.job} --time {self.rfc3339}"

    def fields(self, team: str) -> dict[str, str]:
        """The fields of its log line, beside severity, message, logger and version."""
        return {
            MISSED_RUN_FIELD: self.state.value,
            "job": self.job.job,
            "scheduler_job": self.job.scheduler_job,
            "schedule_time": self.rfc3339,
            "run_key": self.run_key,
            "command": self.command(team),
        }


_MESSAGES = {
    MissedRun.NEVER_DELIVERED: "scheduled run has no record past its grace: never delivered",
    MissedRun.WAITED_OUT: "scheduled run has no record past its grace: it waited for the run before it "
    "(409 waiting) until its retries ran out",
    MissedRun.STILL_HELD: "scheduled run is still held past its grace",
    MissedRun.RETRIED_OUT: "scheduled run was left in progress with its lease expired: retries ran out",
}


def judge(record: Mapping[str, Any] | None, now: datetime, grace: timedelta) -> MissedRun | None:
    """How a run whose grace has passed was missed, from its record; None if it finished, or if an
    operator re-ran it and the re-run may still finish (see the module)."""
    if record is None:
        return MissedRun.NEVER_DELIVERED
    if record.get(STATUS_FIELD) in _FINISHED:
        return None
    lease = record.get("lease_expires")
    live = isinstance(lease, datetime) and lease.tzinfo is not None and lease > now
    if HISTORY_FIELD in record or CAUSE_FIELD in record:
        rerun = _rerun_at(record)
        if live or (rerun is not None and now <= rerun + grace):
            return None
        return MissedRun.RETRIED_OUT
    return MissedRun.STILL_HELD if live else MissedRun.RETRIED_OUT


def _rerun_at(record: Mapping[str, Any]) -> datetime | None:
    """When a request last started the run (its `rerun`, `backfill` or `catch_up` action)."""
    for action in reversed(record.get(ACTIONS_FIELD) or []):
        if not isinstance(action, Mapping) or action.get("action") not in STARTED_ACTIONS:
            continue
        at = action.get("at")
        return at if isinstance(at, datetime) and at.tzinfo is not None else None
    return None


@dataclass(frozen=True)
class Judged:
    """One expected run of a watched job past its grace: its record and how it was missed (None:
    it finished, or it may still)."""

    job: WatchedJob
    schedule_time: datetime
    run_key: str
    record: Mapping[str, Any] | None
    state: MissedRun | None

    def missed(self) -> Missed | None:
        """The run as the watchdog reports it, or None if it was not missed."""
        if self.state is None:
            return None
        seen = self.record or {}
        return Missed(
            self.job,
            self.schedule_time,
            self.run_key,
            self.state,
            len(seen.get(ACTIONS_FIELD) or []),
            seen.get("attempt_id"),
            seen.get(STATUS_FIELD),
            seen.get(CAUSE_REQUEST_FIELD),
        )

    @property
    def failed(self) -> bool:
        """Whether the run ended failed: a permanent failure, or retried out."""
        return self.state is MissedRun.RETRIED_OUT or (
            self.record is not None and self.record.get(STATUS_FIELD) == RunStatus.FAILED.value
        )


def judged_runs(watch: Watch, ledger: Store, now: datetime) -> list[Judged]:
    """Every expected run of every watched job, past its grace and within its lookback, with its
    record and how it was missed, oldest first per job. Records are read `READERS` at a time (a
    day of a job every two minutes is 720 reads). StoreError from the ledger reaches the caller."""
    expected = [
        (job, time, scheduled_key(job.scheduler_job, time, watch.project, watch.location_of(job)))
        for job in watch.jobs
        for time in _window(job, now)
    ]
    with ThreadPoolExecutor(max_workers=READERS) as pool:
        records = list(pool.map(ledger.read, [key for _, _, key in expected]))
        states = [
            judge(record, now, job.grace) for (job, _, _), record in zip(expected, records, strict=True)
        ]
        # A run without a record may have waited for the run before it (a `wait` job's 409): its note
        # says so.
        unrecorded = [
            key
            for (_, _, key), state in zip(expected, states, strict=True)
            if state is MissedRun.NEVER_DELIVERED
        ]
        notes = pool.map(ledger.read, [waiting_note(key) for key in unrecorded])
        waited = {key for key, note in zip(unrecorded, notes, strict=True) if note is not None}
    return [
        Judged(job, time, key, record, MissedRun.WAITED_OUT if key in waited else state)
        for (job, time, key), record, state in zip(expected, records, states, strict=True)
    ]


def missed_runs(watch: Watch, ledger: Store, now: datetime) -> Iterator[Missed]:
    """Every expected run of every watched job, past its grace and within its lookback, that did
    not finish, oldest first per job (`judged_runs`)."""
    for run in judged_runs(watch, ledger, now):
        missed = run.missed()
        if missed is not None:
            yield missed


def _window(job: WatchedJob, now: datetime) -> list[datetime]:
    """The job's expected schedule times after it existed, in its lookback, past their grace."""
    start, end = max(now - job.lookback, job.since), now - job.grace
    times = expected_times(job.schedule, job.time_zone, start, end) if end > start else []
    return included(job.calendar, times)


def report(watch: Watch, missed: Missed, claims: Store, **extra: str) -> bool:
    """Log `missed` as one ERROR line (with `extra` fields) unless another tick has claimed it;
    whether this one did."""
    claim = claims.claim(missed.marker, missed.fields(watch.team))
    if not isinstance(claim, Claim):
        return False
    log_as(WATCHDOG_LOGGER, logging.ERROR, _MESSAGES[missed.state], **missed.fields(watch.team), **extra)
    claims.complete(claim, StoredResult.of(missed.state.value))
    return True


class Scheduler(Protocol):
    """Cloud Scheduler as a catch-up uses it: the watchdog function gives the REST API, the tests a
    stand-in. `job` is the Scheduler job's full name, projects/P/locations/L/jobs/J."""

    def run(self, job: str) -> None:
        """Run the job now (`jobs.run`); any exception says it was not run."""
        ...

    def pause(self, job: str) -> None:
        """Pause the job (`jobs.pause`); any exception says it was not paused."""
        ...

    def paused_since(self, job: str) -> datetime | None:
        """When the job was paused (`jobs.get`: its `userUpdateTime` while its `state` is
        PAUSED), or None if it is not paused."""
        ...


@dataclass
class CatchUp:
    """One tick's catch-ups: at most one per job (a job's re-run slot holds one request)."""

    watch: Watch
    ledger: Store
    claims: Store
    scheduler: Scheduler
    now: datetime
    started: int = 0
    _busy: frozenset[str] = frozenset()

    def catchable(self, missed: Missed) -> bool:
        """Whether `missed` is its job's to start: never delivered or retried out, within the
        job's catch-up window."""
        window = missed.job.catch_up
        return (
            window > timedelta(0) and missed.state in _CATCHABLE and self.now - missed.schedule_time <= window
        )

    def extra(self, missed: Missed) -> dict[str, str] | None:
        """What to add to `missed`'s report ({} for a run that is no catch-up's), or None to say
        nothing this tick: its catch-up was started and may still be delivered, another tick is
        at it, or the job's slot is taken this tick (a later tick tries)."""
        if missed.job.catch_up <= timedelta(0) or missed.state not in _CATCHABLE:
            return {}
        marker = CATCH_UP_PREFIX + missed.run_key
        earlier = self.claims.read(marker)
        if earlier is not None and not _abandoned(earlier, self.now):
            return self._earlier(missed, earlier)
        if not self.catchable(missed):
            return {}
        if missed.job.job in self._busy:
            return None
        claim = self.claims.claim(marker, missed.fields(self.watch.team))
        if isinstance(claim, Held):
            return None  # another tick got there first
        self._busy |= {missed.job.job}
        outcome = self._start(missed, claim)
        if outcome is None:
            self.claims.release(claim)
            return None
        self.claims.complete(claim, StoredResult.of(outcome))
        if outcome[CATCH_UP_FIELD] == "started":
            self.started += 1
        # Started: its run comes; changed: someone else ran it meanwhile. A later tick judges it.
        return None if outcome[CATCH_UP_FIELD] in ("started", "changed") else outcome

    def _earlier(self, missed: Missed, record: Mapping[str, Any]) -> dict[str, str] | None:
        """The catch-up an earlier tick made of `missed` (its claim's `record`)."""
        if record.get(STATUS_FIELD) != RunStatus.COMPLETED.value:
            return None  # another tick is at it
        done = StoredResult.from_record(dict(record)).value
        done = done if isinstance(done, dict) else {}
        if done.get(CATCH_UP_FIELD) != "started":
            return {name: str(value) for name, value in done.items() if name != "at"}
        if missed.started_by is not None and missed.started_by == done.get("request_id"):
            return {}  # the catch-up was delivered and its own attempt is what was missed
        at = parse_instant(str(done.get("at"))).utc
        if self.now <= at + CATCH_UP_REQUEST_TTL + missed.job.grace:
            return None  # its delivery may still come, or its run still finish
        return {CATCH_UP_FIELD: "not_delivered", "catch_up_request": str(done.get("request_id"))}

    def _start(self, missed: Missed, claim: Claim) -> dict[str, str] | None:
        """File the catch-up's request and run the job: the outcome to keep on the claim, or None
        when the job's slot holds another request (nothing was tried)."""
        from ..core.requests import RequestPending, RunChanged

        name = self.watch.scheduler_job(missed.job)
        slot = rerun_slot(self.watch.project, self.watch.location_of(missed.job), missed.job.scheduler_job)
        fields: dict[str, Any] = {
            "by": CATCH_UP_BY,
            "schedule_time": missed.rfc3339,
            "scheduler_job": missed.job.scheduler_job,
            CAUSE_FIELD: Cause.CATCH_UP.value,
            EXPECTED_ATTEMPT_FIELD: missed.attempt_id,
            EXPECTED_STATUS_FIELD: missed.status,
        }
        try:
            request = self.ledger.request_rerun(slot, missed.run_key, fields, False, CATCH_UP_REQUEST_TTL)
        except RequestPending:
            return None
        except RunChanged as exc:
            return {CATCH_UP_FIELD: "changed", "catch_up_error": str(exc)}
        except RunonceError as exc:  # refused, or the ledger refused the write (its grant)
            return _failed(f"the catch-up's request was not written: {exc}")
        try:
            self.scheduler.run(name)
        except Exception as exc:  # whatever the API or its transport raised: reported, not retried
            if self.ledger.withdraw_rerun(slot, request.request_id):
                return _failed(f"jobs.run of {name} failed: {exc}")
            # Not withdrawn: a delivery took the request, so the job ran; only the answer was lost.
        fields = {
            name: value for name, value in missed.fields(self.watch.team).items() if name != MISSED_RUN_FIELD
        }
        log_as(
            WATCHDOG_LOGGER,
            logging.WARNING,
            "missed run within its catch-up window: started once through Cloud Scheduler",
            **fields,
            caught_up=missed.state.value,
            **{CATCH_UP_FIELD: "started", "catch_up_request": request.request_id},
        )
        return {CATCH_UP_FIELD: "started", "at": self.now.isoformat(), "request_id": request.request_id}


def _abandoned(record: Mapping[str, Any], now: datetime) -> bool:
    """Whether a catch-up claim was left in progress by a tick that died (its lease ended)."""
    lease = record.get("lease_expires")
    return (
        record.get(STATUS_FIELD) == RunStatus.IN_PROGRESS.value
        and isinstance(lease, datetime)
        and lease <= now
    )


def _failed(why: str) -> dict[str, str]:
    return {CATCH_UP_FIELD: "failed", "catch_up_error": why}


PAUSE_PREFIX = "pause:"
"""The watchdog's claim of a pause is the run key of the failed run that completed the streak,
with this prefix, in its own store: one pause per streak, however many ticks see it."""
PAUSED_MESSAGE = "job paused after consecutive failed runs: runonce resume starts it again"


@dataclass
class Pausing:
    """One tick's pauses: a job with `pause_after_failures` whose last runs all failed is paused
    once (a claim of `pause:<run key>` in the watchdog's store decides which tick calls
    `jobs.pause`); the failed runs before a pause never count toward the next one."""

    watch: Watch
    claims: Store
    scheduler: Scheduler
    now: datetime
    paused: int = 0
    _since: dict[str, datetime | None] | None = None

    def paused_since(self, job: WatchedJob) -> datetime | None:
        """When `job`'s Scheduler job was paused (read once a tick), or None; always None for a
        job the watchdog never pauses."""
        if not job.pause_after_failures:
            return None
        known = self._since if self._since is not None else {}
        self._since = known
        if job.job not in known:
            known[job.job] = self.scheduler.paused_since(self.watch.scheduler_job(job))
        return known[job.job]

    def consider(self, job: WatchedJob, runs: list[Judged]) -> None:
        """Pause `job` if its latest `pause_after_failures` runs (of `runs`, oldest first) failed
        and no earlier pause took them."""
        if not job.pause_after_failures or self.paused_since(job) is not None:
            return
        streak: list[Judged] = []
        consumed_until: datetime | None = None
        for run in runs:
            if consumed_until is not None and run.schedule_time <= consumed_until:
                continue  # failed before the last pause took effect: it never counts again
            if run.state is MissedRun.STILL_HELD:
                continue  # not ended yet
            if not run.failed:
                streak = []
                continue
            earlier = self.claims.read(PAUSE_PREFIX + run.run_key)
            if earlier is not None and earlier.get(STATUS_FIELD) == RunStatus.COMPLETED.value:
                done = StoredResult.from_record(dict(earlier)).value
                at = done.get("at") if isinstance(done, dict) else None
                consumed_until = parse_instant(str(at)).utc if at else run.schedule_time
                streak = []
                continue
            streak.append(run)
        if len(streak) >= job.pause_after_failures:
            self._pause(job, streak[-job.pause_after_failures :])

    def _pause(self, job: WatchedJob, failed: list[Judged]) -> None:
        name = self.watch.scheduler_job(job)
        runs = ",".join(run.run_key for run in failed)
        fields = {"job": job.job, "scheduler_job": job.scheduler_job, "failed_runs": runs}
        claim = self.claims.claim(PAUSE_PREFIX + failed[-1].run_key, fields)
        if not isinstance(claim, Claim):
            return  # another tick paused it, or is pausing it
        line = {
            **fields,
            PAUSED_FIELD: str(len(failed)),
            "paused_by": CATCH_UP_BY,
            "first_failed_time": _rfc3339(failed[0].schedule_time),
            "last_failed_time": _rfc3339(failed[-1].schedule_time),
            "command": f"runonce resume --team {self.watch.team} --job {job.job}",
        }
        try:
            self.scheduler.pause(name)
        except Exception as exc:  # whatever the API or its transport raised: a later tick tries again
            self.claims.release(claim)
            log_as(WATCHDOG_LOGGER, logging.WARNING, f"jobs.pause of {name} failed: {exc}", **fields)
            return
        self.claims.complete(claim, StoredResult.of({**line, "at": self.now.isoformat()}))
        log_as(WATCHDOG_LOGGER, logging.ERROR, PAUSED_MESSAGE, **line)
        self.paused += 1


def _rfc3339(time: datetime) -> str:
    """`time` as a record and a delivery write a schedule time."""
    return Instant(time.replace(microsecond=0), 0).rfc3339()


def check(
    watch: Watch,
    ledger: Store,
    claims: Store,
    now: datetime | None = None,
    scheduler: Scheduler | None = None,
) -> dict[str, int]:
    """Judge every watched job's runs at `now` (default: runonce's clock) and report each missed
    run once; with `scheduler`, first pause (once) each job with `pause_after_failures` whose last
    runs all failed, and start (once) each missed run within its job's catch-up window, reporting
    it only if that fails or its run does not come. A paused job's runs scheduled since its pause
    are not reported. How many jobs were checked, runs found missed, missed runs this call
    reported, catch-ups it started and (with a job that may be paused) jobs it paused."""
    now = now or _clock.now()
    found = reported = 0
    runs = judged_runs(watch, ledger, now)
    catching = CatchUp(watch, ledger, claims, scheduler, now) if scheduler is not None else None
    pausing = Pausing(watch, claims, scheduler, now) if scheduler is not None else None
    if pausing is not None:
        for job in watch.jobs:
            pausing.consider(job, [run for run in runs if run.job is job])
    for run in runs:
        missed = run.missed()
        if missed is None:
            continue
        since = pausing.paused_since(missed.job) if pausing is not None else None
        if since is not None and missed.schedule_time >= since:
            continue  # paused: the tick was never meant to run
        found += 1
        extra = catching.extra(missed) if catching is not None else {}
        if extra is not None:
            reported += report(watch, missed, claims, **extra)
    counts = {"jobs": len(watch.jobs), "missed": found, "reported": reported}
    if catching is None or pausing is None:
        return counts
    counts["caught_up"] = catching.started
    if any(job.pause_after_failures for job in watch.jobs):
        counts["paused"] = pausing.paused
    return counts


@dataclass(frozen=True)
class WatchSettings:
    """The watchdog function's settings, read from its environment."""

    watch: Watch
    ledger_database: str
    """The team's ledger database, which the watchdog only reads."""
    ledger_collection: str
    """The team's ledger collection."""


def watch_settings(environ: Mapping[str, str]) -> WatchSettings:
    """The settings the stack put in `environ`; ConfigError naming the first variable missing or wrong."""
    names = (
        WATCHDOG_TEAM_VARIABLE,
        PROJECT_VARIABLE,
        WATCHDOG_LOCATION_VARIABLE,
        WATCHDOG_LEDGER_DATABASE_VARIABLE,
        WATCHDOG_LEDGER_COLLECTION_VARIABLE,
        WATCHDOG_JOBS_VARIABLE,
    )
    missing = [name for name in names if not environ.get(name)]
    if missing:
        raise ConfigError(f"the watchdog needs {', '.join(missing)} set (the stack sets them): redeploy")
    watch = Watch(
        team=environ[WATCHDOG_TEAM_VARIABLE],
        project=environ[PROJECT_VARIABLE],
        location=environ[WATCHDOG_LOCATION_VARIABLE],
        jobs=parse_jobs(environ[WATCHDOG_JOBS_VARIABLE], WATCHDOG_JOBS_VARIABLE),
    )
    return WatchSettings(
        watch, environ[WATCHDOG_LEDGER_DATABASE_VARIABLE], environ[WATCHDOG_LEDGER_COLLECTION_VARIABLE]
    )


def parse_jobs(text: str, variable: str) -> tuple[WatchedJob, ...]:
    """The watched jobs from their JSON list (the stack writes it into `variable`); ConfigError
    naming the variable, the job and the field for anything that cannot be checked."""
    try:
        entries = json.loads(text)
    except ValueError as exc:
        raise ConfigError(f"{variable} is not JSON ({exc}): the stack writes it; redeploy") from None
    if not isinstance(entries, list):
        raise ConfigError(f"{variable} must be a JSON list of jobs, not {type(entries).__name__}")
    return tuple(_job(entry, index, variable) for index, entry in enumerate(entries))


def _job(entry: Any, index: int, variable: str) -> WatchedJob:
    where = f"{variable}[{index}]"
    if not isinstance(entry, dict):
        raise ConfigError(f"{where} must be an object with {', '.join(_JOB_FIELDS)}")
    missing = [name for name in _JOB_FIELDS if name not in entry]
    if missing:
        raise ConfigError(f"{where} lacks {', '.join(missing)}")
    where = f"{where} (job {entry['job']!r})"
    for name in ("job", "scheduler_job", "schedule", "time_zone", "since"):
        if not isinstance(entry[name], str) or not entry[name]:
            raise ConfigError(f"{where}: {name} must be a non-empty string")
    for name in ("grace_seconds", "lookback_seconds"):
        value = entry[name]
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise ConfigError(f"{where}: {name} must be a whole number of seconds, at least 0")
    try:
        since = parse_instant(entry["since"]).utc
    except ValueError as exc:
        raise ConfigError(f"{where}: since: {exc}") from None
    try:
        CronSim(entry["schedule"], since)
    except CronSimError as exc:
        raise ConfigError(
            f"{where}: schedule {entry['schedule']!r} is not a cron expression ({exc})"
        ) from None
    try:
        expected_times(entry["schedule"], entry["time_zone"], since, since)
    except Exception as exc:  # ZoneInfoNotFoundError, or a key that is no zone name at all
        raise ConfigError(
            f"{where}: time_zone {entry['time_zone']!r} is not an IANA time zone ({exc})"
        ) from None
    catch_up = entry.get("catch_up_seconds", 0)
    if isinstance(catch_up, bool) or not isinstance(catch_up, int) or catch_up < 0:
        raise ConfigError(f"{where}: catch_up_seconds must be a whole number of seconds, at least 0")
    location = entry.get("location", "")
    if not isinstance(location, str) or ("location" in entry and not location):
        raise ConfigError(f"{where}: location, when given, must be a non-empty region name")
    pause = entry.get("pause_after_failures", 0)
    if isinstance(pause, bool) or not isinstance(pause, int) or pause < 0:
        raise ConfigError(f"{where}: pause_after_failures must be a whole number of runs, at least 0")
    calendar = entry.get("calendar")
    if calendar is not None and not isinstance(calendar, str):
        raise ConfigError(f"{where}: calendar, when given, must be the X-Runonce-Calendar header's text")
    try:
        parsed = parse_calendar(calendar) if calendar else None
    except ConfigError as exc:
        raise ConfigError(f"{where}: calendar: {exc}") from None
    return WatchedJob(
        job=entry["job"],
        scheduler_job=entry["scheduler_job"],
        schedule=entry["schedule"],
        time_zone=entry["time_zone"],
        grace=timedelta(seconds=entry["grace_seconds"]),
        lookback=timedelta(seconds=entry["lookback_seconds"]),
        since=since,
        catch_up=timedelta(seconds=catch_up),
        location=location,
        pause_after_failures=pause,
        calendar=parsed,
    )
