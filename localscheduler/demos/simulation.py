"""One simulation: instance pools for a set of teams, the scheduler on an accelerated clock, and
the verdict from the store. The demo and the chaos suites both run one. The instances serve each
job's own folder on functions-framework, or one service's app on its server (`service`: any of
`localscheduler.hosts.service`); with `team_services`, the teams' service jobs too, each on the
local app standing in for its Cloud Run service, delivered and judged like any job.

The lease is the one setting the simulation chooses instead of the team file: in production it
is the function timeout plus a margin, minutes that an accelerated clock would turn into seconds
while the retries come milliseconds apart. To show the takeover of a crashed attempt inside the
demo, each job's lease is cut to 60% of the time its last retry comes (never above the deployed
lease, never below 1 s). On a Valkey store (`store`) the lease runs on the server's clock, at
wall speed: the instances get it in whole wall seconds (at least 1), which the rate turns back into
the simulated lease the scheduler and the judges use (`leases`), so a Valkey simulation picks a
rate at which that lease still ends before its jobs' last retry.
"""

from __future__ import annotations

import itertools
import threading
from collections import defaultdict
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from pathlib import Path

from google.cloud import firestore

from emulator.googleapis import GoogleApisStandIn
from localscheduler.clock import CLOCK_FILE_VARIABLE, AcceleratedClock
from localscheduler.demos.proxy import proxy_env
from localscheduler.hosts.apps.job import ATTEMPT_ID_FIELD, RUN_KEY_FIELD
from localscheduler.hosts.pool import InstancePool
from localscheduler.hosts.service import Service, TeamServices
from localscheduler.scheduler.cloud_scheduler import LocalScheduler, Trigger, triggers
from localscheduler.scheduler.faults import FaultMix
from localscheduler.scheduler.journal import Journal, Sent
from localscheduler.scheduler.misses import PlannedMisses
from localscheduler.scheduler.plan import PlannedRun, planned_runs
from localscheduler.scheduler.retry import RetryPolicy
from localscheduler.store import Ledger, StoreView, ledger, store_env
from localscheduler.verdicts.bodies import Body, read_bodies
from localscheduler.verdicts.effects import Effects, FirestoreEffects, StartedAtStandIn, declared_effects
from localscheduler.verdicts.scheduled import JobRow, RunVerdict, job_rows, judge
from runonce import contract
from runonce.core.settings import DEFAULT_FORCED_SKEW_SECONDS
from stacks.team import Job, Team

LEASE_SHARE_OF_RETRY_WINDOW = 0.6


def simulation_lease(job: Job, runs: list[PlannedRun]) -> int:
    """The run lease (simulated seconds) that lets the last retry take over a crashed attempt."""
    if len(runs) < 2:
        return job.lease_seconds
    shortest = min(b.schedule_time - a.schedule_time for a, b in itertools.pairwise(runs))
    start = runs[0].schedule_time
    retries = RetryPolicy(job.retry).retry_times(start, start + shortest)
    if not retries:
        return job.lease_seconds
    last = (retries[-1] - start).total_seconds()
    return max(1, min(job.lease_seconds, int(last * LEASE_SHARE_OF_RETRY_WINDOW)))


def _job_of(trigger: Trigger) -> tuple[str, str]:
    return (trigger.run.team.name, trigger.run.job.name)


def _run_of(trigger: Trigger) -> tuple:
    """The journal's identity of a trigger's deliveries: team, job, ScheduleTime, forced."""
    return (trigger.run.team.name, trigger.run.job.name, trigger.run.schedule_time, trigger.forced)


@dataclass(frozen=True)
class Result:
    """What a simulation produced: the plan, a verdict per run, the journal, the table rows."""

    plan: list[Trigger]
    verdicts: list[RunVerdict]
    journal: Journal
    rows: list[JobRow]
    restarts: int
    leases: dict[tuple[str, str], int]
    bodies: dict[str, list[Body]]
    """The job bodies the instance logs show, by run key, in start order."""
    writers: dict[str, list[str | None]]
    """The attempts that wrote each run's effects, by run key (None: writer not recorded), for
    the jobs whose effects are observed."""

    @property
    def ok(self) -> bool:
        """Every run took effect exactly once within its retry window."""
        return all(verdict.ok for verdict in self.verdicts)


@dataclass
class Simulation:
    """Teams' jobs served by local instances and driven by the local scheduler."""

    teams: list[Team]
    start: datetime
    """Simulated time the schedule starts at (runs after it are planned)."""
    span: timedelta
    """Simulated time the schedule covers; retries of the last runs may run past it."""
    rate: float
    """Simulated seconds per wall second."""
    faults: FaultMix
    log_dir: Path
    """Instance logs, the scheduler journal and the clock spec go here."""
    project: str
    """GOOGLE_CLOUD_PROJECT of the instances and of the store client."""
    emulator_host: str
    """FIRESTORE_EMULATOR_HOST."""
    instances_per_job: int = 2
    """Instances per function, at most the job's max_instances."""
    misses: PlannedMisses = field(default_factory=PlannedMisses)
    """The runs lost on purpose (none by default)."""
    service: Service | None = None
    """The app every job runs on, a Cloud Run service (`localscheduler.hosts.service`: Flask or
    Django on gunicorn, FastAPI on uvicorn); None: each job's own folder on functions-framework."""
    team_services: TeamServices | None = None
    """How the teams' service jobs are served (each as the `Job` its Scheduler settings are
    checked as, `ServiceJob.scheduled`); None: they are not played."""
    store: str | None = None
    """The instances' RUNONCE_STORE: a Valkey server's URL; None: the Firestore emulator. The
    effects stay in Firestore either way."""
    pools: dict[tuple[str, str], InstancePool] = field(default_factory=dict)
    leases: dict[tuple[str, str], int] = field(default_factory=dict)
    """Each served job's run lease in simulated seconds (set as the instances start)."""
    scheduler: LocalScheduler | None = None
    stand_in: GoogleApisStandIn | None = None
    """The Google APIs stand-in the proxies of jobs with a `target` call (started if any)."""
    _stopped: threading.Event = field(default_factory=threading.Event)

    def served(self) -> list[tuple[Team, Job, Service | None]]:
        """Every job played, with the service its instances run (None: its own folder): the
        function jobs, then the service jobs `team_services` serves."""
        served = [(team, job, self.service) for team in self.teams for job in team.jobs]
        if self.team_services is None:
            return served
        for team in self.teams:
            for job in team.service_jobs:
                service = team.service(job.service)
                if service is not None and self.team_services.serves(job):
                    view = job.scheduled(service.timeout_seconds)
                    if service.deployed:  # its instances are the team file's to bound
                        view = replace(view, max_instances=service.max_instances)
                    served.append((team, view, self.team_services.local(team, service)))
        return served

    def runs(self) -> dict[tuple[str, str], list[PlannedRun]]:
        """Every played job's scheduled runs in the span (an empty list for a job with none)."""
        return {
            (team.name, job.name): planned_runs(team, job, self.start, self.start + self.span)
            for team, job, _ in self.served()
        }

    def start_instances(self) -> None:
        """Start every job's instance pool and wait until all serve."""
        self.log_dir.mkdir(parents=True, exist_ok=True)
        runs = self.runs()
        for team, job, service in self.served():
            if runs[(team.name, job.name)]:
                lease = simulation_lease(job, runs[(team.name, job.name)])
                if self.store is not None:  # the server's clock: whole wall seconds
                    lease = max(1, round(lease / self.rate))
                    self.leases[(team.name, job.name)] = round(lease * self.rate)
                else:
                    self.leases[(team.name, job.name)] = lease
                env = {
                    **job.env,
                    contract.PROJECT_VARIABLE: self.project,
                    "FIRESTORE_EMULATOR_HOST": self.emulator_host,
                    contract.LEASE_VARIABLE: str(lease),
                    contract.RETENTION_VARIABLE: str(job.retention_seconds),
                    CLOCK_FILE_VARIABLE: str(self.clock_file),
                    **store_env(self.store),
                    **self._target_env(job),
                }
                size = max(1, min(job.max_instances, self.instances_per_job))
                name = f"{team.name}-{job.name}"
                self.pools[(team.name, job.name)] = (
                    InstancePool(name, job.source_dir / "main.py", job.entry_point, size, env, self.log_dir)
                    if service is None
                    else service.pool(name, size, env, self.log_dir)
                )
        threads = [threading.Thread(target=pool.start) for pool in self.pools.values()]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        not_ready = [pool.name for pool in self.pools.values() if not all(i.ready for i in pool.instances)]
        if not_ready:
            raise RuntimeError(f"instances of {', '.join(not_ready)} did not start; see {self.log_dir}")

    def _target_env(self, job: Job) -> dict[str, str]:
        """For a job with a target: the proxy's settings pointed at the stand-in (started on first
        need)."""
        if job.target is None:
            return {}
        if self.stand_in is None:
            self.stand_in = GoogleApisStandIn().start()
        return proxy_env(job.target, self.stand_in)

    @property
    def clock_file(self) -> Path:
        """Where the clock spec is written for the instances to read."""
        return self.log_dir / "clock"

    def plan(self) -> list[Trigger]:
        """The scheduled runs of the jobs being served, plus the forced runs of the fault mix,
        with the planned misses marked."""
        plan = [
            trigger
            for key, job_runs in self.runs().items()
            if key in self.pools
            for trigger in triggers(job_runs, self.faults, DEFAULT_FORCED_SKEW_SECONDS)
        ]
        return self.misses.place(plan, self.start, self.start + self.span)

    def run(self) -> Result:
        """Play the schedule with faults and judge every run; instances must be started."""
        plan = self.plan()
        clock = AcceleratedClock.starting_now(self.start, self.rate)
        self.clock_file.write_text(clock.spec())
        journal = Journal(self.log_dir / "scheduler.jsonl")
        runs = self.ledger(clock)
        self.scheduler = LocalScheduler(clock, self.pools, dict(self.leases), self.faults, runs, journal)
        if self._stopped.is_set():
            self.scheduler.stop()
        self.scheduler.run(plan)
        journal.close()
        return self.judged(plan, journal)

    def judged(self, plan: list[Trigger], journal: Journal) -> Result:
        """Judge every run of a played `plan` from the store, the instance logs and `journal`, as
        they are now."""
        if self.scheduler is None:
            raise RuntimeError("judged() reads what run() played: call run() first")
        client = firestore.Client(project=self.project)
        clock = self.scheduler.clock
        declared = self.declared_effects()
        view = StoreView.read(client, declared.values(), self.ledger(clock))
        bodies = read_bodies(self.log_dir, clock)
        sent: dict[tuple, list[Sent]] = defaultdict(list)
        for entry in journal.sent():
            sent[(entry.team, entry.job, entry.schedule_time, entry.forced)].append(entry)
        verdicts = [
            judge(
                trigger,
                view.records.get(trigger.key),
                view.effects.get(trigger.key, []) if _job_of(trigger) in declared else None,
                bodies.get(trigger.key, []),
                sent[_run_of(trigger)],
            )
            for trigger in sorted(plan, key=lambda t: t.at)
        ]
        restarts = sum(pool.restarts for pool in self.pools.values())
        writers = {key: view.effects.get(key, []) for key in {t.key for t in plan if _job_of(t) in declared}}
        rows = job_rows(verdicts, journal)
        return Result(plan, verdicts, journal, rows, restarts, dict(self.leases), bodies, writers)

    def ledger(self, clock: AcceleratedClock) -> Ledger:
        """Where the instances keep their runs; a Valkey server's instants read on `clock`."""
        client = firestore.Client(project=self.project)
        return ledger(client, self.store, timeline=lambda instant: clock.at_wall(instant.timestamp()))

    def declared_effects(self) -> dict[tuple[str, str], Effects]:
        """Where each served job's effects are: the service's outbox on a service; what the
        stand-in started for a job with a target, else what its folder declares (jobs whose folder
        declares nothing are left out)."""
        declared: dict[tuple[str, str], Effects] = {}
        for team, job, service in self.served():
            if (team.name, job.name) not in self.pools:
                continue
            effects: Effects | None = (
                FirestoreEffects(service.outbox, RUN_KEY_FIELD, ATTEMPT_ID_FIELD)
                if service is not None
                else StartedAtStandIn(self.stand_in)
                if job.target is not None and self.stand_in is not None
                else declared_effects(job.source_dir)
            )
            if effects is not None:
                declared[(team.name, job.name)] = effects
        return declared

    def stop(self) -> None:
        """Stop sending and stop every instance; safe to call from a signal handler, and twice."""
        self._stopped.set()
        if self.scheduler is not None:
            self.scheduler.stop()
        for pool in self.pools.values():
            pool.stop()
        if self.stand_in is not None:
            self.stand_in.stop()

    def pids(self) -> list[int]:
        """Instance processes still running."""
        return [pid for pool in self.pools.values() for pid in pool.pids()]
