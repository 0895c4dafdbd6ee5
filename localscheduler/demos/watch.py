"""The demo's last act, per team: its watchdog on the demo's ledger, then `runonce runs` for the
job of the runs lost on purpose.

The team's `Watch` is the one the stack would deploy for the jobs the demo served, on functions
and on services (Scheduler job ids, schedules, time zones; the project and region the X-Runonce
headers carry, which the run keys hash), with two demo settings: the grace is the job's retry
window plus the lease its local instances ran with (the demo cuts the lease, see `simulation`),
and the runs checked start after the played window's start. The watchdog reads the demo's ledger
through the Firestore `Store`, and keeps its claims of the runs it reports in a collection of its
own on the same emulator, as the deployed one keeps them in its own database.

It ticks twice at the end of the played window, not at the simulated clock's time: that clock
runs on through the event part of the demo, and there the watchdog would expect scheduled runs
the demo never played. The first tick must report exactly the planned misses (job, schedule
time, `MissedRun`), the second none: each missed run is reported once. Each report is the
watchdog's own ERROR line (JSON on stdout); the verdict follows in one line.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from google.cloud import firestore

from localscheduler.scheduler.cloud_scheduler import Trigger
from localscheduler.store import RUNS_COLLECTION
from operate import runs
from operate.cli import print_runs
from operate.team import ScheduledJob, view
from runonce._instant import parse_instant
from runonce.contract import MISSED_RUN_FIELD, MissedRun
from runonce.core.settings import DEFAULT_LEASE_SECONDS, DEFAULT_RETENTION_SECONDS
from runonce.core.store import Store
from runonce.scheduler.watchdog import Watch, WatchedJob, check
from runonce.store.firestore import Ledger, LedgerStore
from stacks.naming import scheduler_job_name
from stacks.team import Team
from stacks.validate.windows import retry_window_seconds

WATCHDOG_COLLECTION = "watchdog_claims"
"""The watchdog's own collection on the demo's emulator: its claims of the runs it reported."""

Report = tuple[str, datetime, MissedRun]
"""One missed run as the watchdog reports it: the team file's job, the schedule time (UTC), how."""


@dataclass(frozen=True)
class FirestoreSettings:
    """Where the demo's ledger is: the emulator, the project the instances run as, the
    collection; and the watchdog's own collection there."""

    emulator_host: str
    project: str
    collection: str = RUNS_COLLECTION
    watchdog_collection: str = WATCHDOG_COLLECTION

    def stores(self) -> tuple[Store, Store]:
        """The demo's ledger and the watchdog's claims, as Stores (FIRESTORE_EMULATOR_HOST set)."""
        client = firestore.Client(project=self.project)
        lease = timedelta(seconds=DEFAULT_LEASE_SECONDS)
        retention = timedelta(seconds=DEFAULT_RETENTION_SECONDS)
        return (
            LedgerStore(Ledger(client, self.collection, lease, retention)),
            LedgerStore(Ledger(client, self.watchdog_collection, lease, retention)),
        )


def watch_of(team: Team, leases: Mapping[str, int], start: datetime, now: datetime) -> Watch:
    """The team's watch over its jobs in `leases` (job name: the lease its instances ran with,
    simulated seconds), checking the runs after `start` at `now`."""
    jobs = tuple(
        WatchedJob(
            job=job.name,
            scheduler_job=scheduler_job_name(team.name, job.name),
            schedule=job.schedule,
            time_zone=job.time_zone,
            grace=timedelta(seconds=retry_window_seconds(job) + leases[job.name]),
            lookback=now - start,
            since=start,
        )
        for job in team.scheduled_views
        if job.name in leases
    )
    return Watch(team.name, team.project, team.region, jobs)


@dataclass(frozen=True)
class WatchVerdict:
    """The two ticks of the watchdog against the runs lost on purpose."""

    planned: frozenset[Report]
    reported: frozenset[Report]
    """What the first tick claimed and reported (the watchdog's claims, read after it)."""
    first: Mapping[str, int]
    """`check`'s counts of the first tick."""
    second: Mapping[str, int]
    """`check`'s counts of the second tick."""

    @property
    def problems(self) -> list[str]:
        """Each way the ticks differ from the plan, in words."""
        unplanned, unreported = sorted(self.reported - self.planned), sorted(self.planned - self.reported)
        problems = [f"reported a run not lost on purpose: {_words(r)}" for r in unplanned]
        problems += [f"did not report {_words(r)}" for r in unreported]
        if self.first["reported"] != len(self.reported):
            problems.append(
                f"the first tick counted {self.first['reported']} reports for {len(self.reported)} claims"
            )
        if self.second["reported"]:
            problems.append(f"a second tick reported {self.second['reported']} again")
        if self.second["missed"] != self.first["missed"]:
            problems.append(
                f"a second tick found {self.second['missed']} missed runs, the first {self.first['missed']}"
            )
        return problems

    @property
    def ok(self) -> bool:
        """The first tick reported exactly the planned misses, the second nothing."""
        return not self.problems

    def line(self) -> str:
        """The verdict in one line."""
        if self.ok:
            reported = len(self.reported)
            return f"watchdog: {reported} missed runs reported, as planned; a second tick reported none"
        return f"FAIL watchdog: {'; '.join(self.problems)}"


def _words(report: Report) -> str:
    job, moment, state = report
    return f"{job} {moment:%Y-%m-%d %H:%M}Z {state.value}"


def planned(expected: list[Trigger]) -> frozenset[Report]:
    """The reports the runs lost on purpose should get."""
    return frozenset(
        (t.run.job.name, t.run.schedule_time.astimezone(UTC), t.miss) for t in expected if t.miss is not None
    )


def claimed_reports(claims: Store) -> frozenset[Report]:
    """Every missed run the watchdog's claims say it reported."""
    return frozenset(
        (str(r["job"]), parse_instant(str(r["schedule_time"])).utc, MissedRun(r[MISSED_RUN_FIELD]))
        for r in claims.find({}).values()
    )


def watch_missed_runs(
    team: Team,
    leases: Mapping[str, int],
    window: tuple[datetime, datetime],
    firestore_settings: FirestoreSettings,
    expected: list[Trigger],
) -> bool:
    """Tick the team's watchdog twice at the end of `window` (start, end] on the demo's ledger,
    print its lines and the verdict, then the `runonce runs` table of the job of the `expected`
    misses over the window; whether the watchdog reported exactly those, once."""
    start, end = window
    watch = watch_of(team, leases, start, end)
    ledger, claims = firestore_settings.stores()
    print(
        f"watchdog of team {team.name}: {len(watch.jobs)} jobs, runs after {start:%H:%M}Z checked at "
        f"{end:%H:%M}Z (the end of the played window), twice; its claims in "
        f"{firestore_settings.watchdog_collection}",
        flush=True,
    )
    first = check(watch, ledger, claims, end)
    reported = claimed_reports(claims)
    second = check(watch, ledger, claims, end)
    verdict = WatchVerdict(planned(expected), reported, first, second)
    print(verdict.line(), flush=True)
    jobs = sorted({t.run.job.name for t in expected})
    if jobs:
        _runs_table(team, jobs[0], window, ledger, firestore_settings)
    return verdict.ok


def _runs_table(
    team: Team, job_name: str, window: tuple[datetime, datetime], ledger: Store, settings: FirestoreSettings
) -> None:
    names = view(team)
    job = names.job(job_name)
    assert isinstance(job, ScheduledJob), "the planned misses fall on a scheduled job"
    start, end = window
    rows = runs.scheduled_rows(ledger, names, job, start, end)
    print()
    print(
        f"$ runonce runs --team {team.name} --job {job.name}  (over the demo's window, "
        f"{start:%H:%M}-{end:%H:%M}Z; rows read from the demo's emulator ledger: "
        f"{settings.collection} of {settings.project} on {settings.emulator_host})"
    )
    print_runs(f"runs of team {team.name}, job {job.name}, {start:%Y-%m-%d %H:%M}-{end:%H:%M} UTC", rows)
