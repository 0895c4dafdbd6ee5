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

The module reads the ledger through the `Store` protocol only and imports no Google library; the
function (functions/watchdog) gives it the Firestore stores, the tests the in-memory one.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from cronsim import CronSim, CronSimError

from .. import _clock
from .._instant import Instant, parse_instant
from .._logs import log_as
from ..contract import (
    ACTIONS_FIELD,
    HISTORY_FIELD,
    MISSED_RUN_FIELD,
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
from ..core.errors import ConfigError
from ..core.store import Claim, Store, StoredResult
from .expected import expected_times, scheduled_key

READERS = 16
"""How many ledger reads a tick has in flight at once."""
MISSED_PREFIX = "missed:"
"""The watchdog's claim of a missed run is the run key with this prefix, in its own store."""
_FINISHED = {RunStatus.COMPLETED.value, RunStatus.FAILED.value, RunStatus.SKIPPED.value}
RERUN_ACTION = "rerun"
"""The operator action a re-run's delivery records on the run (runonce.store._records)."""
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


@dataclass(frozen=True)
class Watch:
    """What one team's watchdog checks: its jobs, and the project and location their keys hash."""

    team: str
    project: str
    location: str
    jobs: tuple[WatchedJob, ...]


@dataclass(frozen=True)
class Missed:
    """A scheduled run past its grace that did not finish."""

    job: WatchedJob
    schedule_time: datetime
    run_key: str
    state: MissedRun
    acted: int = 0
    """How many operator actions (releases, re-runs) the run's record holds."""

    @property
    def marker(self) -> str:
        """The watchdog's claim of this report: `missed:<run key>`, followed by `:<n>` once the
        record holds n operator actions, so a run missed again after an operator acted is
        reported again."""
        return f"{MISSED_PREFIX}{self.run_key}" + (f":{self.acted}" if self.acted else "")

    @property
    def rfc3339(self) -> str:
        """The schedule time as the record and the delivery write it."""
        return Instant(self.schedule_time.replace(microsecond=0), 0).rfc3339()

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
    if HISTORY_FIELD in record:
        rerun = _rerun_at(record)
        if live or (rerun is not None and now <= rerun + grace):
            return None
        return MissedRun.RETRIED_OUT
    return MissedRun.STILL_HELD if live else MissedRun.RETRIED_OUT


def _rerun_at(record: Mapping[str, Any]) -> datetime | None:
    """When the run's last re-run was delivered (its `rerun` operator action)."""
    for action in reversed(record.get(ACTIONS_FIELD) or []):
        if not isinstance(action, Mapping) or action.get("action") != RERUN_ACTION:
            continue
        at = action.get("at")
        return at if isinstance(at, datetime) and at.tzinfo is not None else None
    return None


def missed_runs(watch: Watch, ledger: Store, now: datetime) -> Iterator[Missed]:
    """Every expected run of every watched job, past its grace and within its lookback, that did
    not finish, oldest first per job. Records are read `READERS` at a time (a day of a job every
    two minutes is 720 reads). StoreError from the ledger reaches the caller."""
    expected = [
        (job, time, scheduled_key(job.scheduler_job, time, watch.project, watch.location))
        for job in watch.jobs
        for time in _window(job, now)
    ]
    with ThreadPoolExecutor(max_workers=READERS) as pool:
        records = pool.map(ledger.read, [key for _, _, key in expected])
        for (job, time, key), record in zip(expected, records, strict=True):
            state = judge(record, now, job.grace)
            if state is not None:
                yield Missed(job, time, key, state, len((record or {}).get(ACTIONS_FIELD) or []))


def _window(job: WatchedJob, now: datetime) -> list[datetime]:
    """The job's expected schedule times after it existed, in its lookback, past their grace."""
    start, end = max(now - job.lookback, job.since), now - job.grace
    return expected_times(job.schedule, job.time_zone, start, end) if end > start else []


def report(watch: Watch, missed: Missed, claims: Store) -> bool:
    """Log `missed` as one ERROR line unless another tick has claimed it; whether this one did."""
    claim = claims.claim(missed.marker, missed.fields(watch.team))
    if not isinstance(claim, Claim):
        return False
    log_as(WATCHDOG_LOGGER, logging.ERROR, _MESSAGES[missed.state], **missed.fields(watch.team))
    claims.complete(claim, StoredResult.of(missed.state.value))
    return True


def check(watch: Watch, ledger: Store, claims: Store, now: datetime | None = None) -> dict[str, int]:
    """Judge every watched job's runs at `now` (default: runonce's clock) and report each missed
    run once; how many jobs were checked, runs found missed, and missed runs this call reported."""
    now = now or _clock.now()
    found = reported = 0
    for missed in missed_runs(watch, ledger, now):
        found += 1
        reported += report(watch, missed, claims)
    return {"jobs": len(watch.jobs), "missed": found, "reported": reported}


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
    return WatchedJob(
        job=entry["job"],
        scheduler_job=entry["scheduler_job"],
        schedule=entry["schedule"],
        time_zone=entry["time_zone"],
        grace=timedelta(seconds=entry["grace_seconds"]),
        lookback=timedelta(seconds=entry["lookback_seconds"]),
        since=since,
    )
