"""The team's watchdog (docs/watchdog.md): a function on its own Scheduler job, every 10 minutes,
that logs one ERROR line per scheduled run of the team that did not finish within its grace.

Its account may read the team's ledger and nothing more there (`roles/datastore.viewer`
conditioned on the ledger's database) and may use its own database, where its ticks and its claims
of the runs it reported live (`roles/datastore.user` conditioned on that one): Firestore's IAM is
granted per database (an IAM condition on the database's resource name; its "Configure database
access conditions"), not per collection, so a store it may write is a database of its own. When a
watched job has a catch-up window (`Job.catch_up_seconds`), and only then, it also gets what a
catch-up needs: `roles/datastore.user` on the ledger's database (the request it writes there) and
Scheduler's job runner on the project (docs/stacks/schedules.md).

Built in two steps by `TeamStack`, as a job's function and Scheduler job are: the construct makes
the account and its grants (which the stack's IAM wait follows); `deploy` then makes, once every
watched job's Scheduler job exists, a `time_static` per job recording when it was deployed (no
run is expected before it; a changed schedule or time zone records a new time), the function,
the invoker's grant on it, a wait for that grant, and the watchdog's own Scheduler job.

A watched job is read and caught up in its Scheduler job's region: the team's, or for an App
Engine job the application's, which its entry of the job list names as `location`.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from constructs import Construct

from runonce import contract
from stacks import naming
from stacks.config import defaults
from stacks.config.lookback import TICK_SCHEDULE, first_judged_seconds, lookback_seconds
from stacks.config.team import FUNCTIONS_DIR, LEASE_MARGIN_SECONDS, Job, Retry, Team
from stacks.constructs.archive import build_archive, with_requirements
from stacks.constructs.build_storage import BuildStorage
from stacks.constructs.dedup_store import DedupStore, DedupStoreProps
from stacks.constructs.deduplicated_function import (
    DeduplicatedFunction,
    DeduplicatedFunctionProps,
    FunctionSpec,
    store_requirements,
)
from stacks.constructs.function_identity import FunctionIdentity, FunctionIdentityProps
from stacks.constructs.identity import custom_role, member
from stacks.constructs.provider import (
    CloudSchedulerJob,
    ProjectIamMember,
    Sleep,
    StaticResource,
)
from stacks.constructs.required_apis import RequiredApis
from stacks.constructs.scheduled_job import ScheduledJob, ScheduledJobProps
from stacks.contract import (
    WATCHDOG_JOBS_VARIABLE,
    WATCHDOG_LEDGER_COLLECTION_VARIABLE,
    WATCHDOG_LEDGER_DATABASE_VARIABLE,
    WATCHDOG_LOCATION_VARIABLE,
    WATCHDOG_TEAM_VARIABLE,
)
from stacks.toolchain import Annotations

COLLECTION = naming.WATCHDOG_COLLECTION
TIMEOUT_SECONDS = 300
TICK_RETRY = Retry(retry_count=2, min_backoff_seconds=30, max_backoff_seconds=120, max_doublings=2)
"""A failed tick is retried twice within its 10 minutes; the next tick checks the same runs anyway."""


@dataclass(frozen=True)
class WatchedJobProps:
    """One scheduled job as the watchdog's configuration names it."""

    job: str
    """The team file's job name."""
    scheduler_job: str
    """Its Scheduler job id (`naming.scheduler_job_name`)."""
    schedule: str
    time_zone: str
    grace_seconds: int
    """Its retry window plus its lease (`stacks.validate.windows.grace_seconds`): a run may finish
    until then."""
    lookback_seconds: int
    """How far back its runs are checked (`lookback_seconds`)."""
    catch_up_seconds: int = 0
    """How far back the watchdog starts a missed run itself (`Job.catch_up_seconds`; 0: it only
    reports)."""
    location: str = ""
    """Its Scheduler job's region when it is not the team's (an App Engine job's is the
    application's, `Team.scheduler_region`); "" for the team's."""
    pause_after_failures: int = 0
    """After how many consecutive failed runs the watchdog pauses its Scheduler job
    (`Job.pause_after_failures`; 0: never)."""
    calendar: str = ""
    """Its calendar (`Job.calendar`) as the X-Runonce-Calendar header carries it; "" for none."""

    @classmethod
    def of(cls, team: Team, job: Job, grace: int) -> WatchedJobProps:
        """The watched form of one of the team's jobs, whose grace is `grace` seconds."""
        region = team.scheduler_region(job.name)
        return cls(
            job=job.name,
            scheduler_job=naming.scheduler_job_name(team.name, job.name),
            schedule=job.schedule,
            time_zone=job.time_zone,
            grace_seconds=grace,
            lookback_seconds=lookback_seconds(grace, job.retention_seconds),
            catch_up_seconds=job.catch_up_seconds,
            location=region if region != team.region else "",
            pause_after_failures=job.pause_after_failures,
            calendar=job.calendar.header_value() if job.calendar else "",
        )

    @property
    def located(self) -> dict[str, str]:
        """`{"location": ...}` for a job whose Scheduler job is not in the team's region, else {}:
        the jobs in the team's region keep the configuration they had without the field."""
        return {"location": self.location} if self.location else {}

    @property
    def checked(self) -> bool:
        """Whether its ledger keeps a run long enough for a tick to judge it after its grace."""
        return self.lookback_seconds > first_judged_seconds(self.grace_seconds)


@dataclass(frozen=True)
class WatchdogProps:
    """One team's watchdog: what it watches and where."""

    project: str
    region: str
    team: str
    ledger: DedupStore
    """The team's ledger: read, and written only for a catch-up (`catches_up`)."""
    location: str
    """Firestore location of the watchdog's own database (the ledger's)."""
    jobs: tuple[WatchedJobProps, ...]
    """The jobs it watches, in team-file order."""
    invoker_email: str
    """The team's invoker account, which its Scheduler job signs as."""
    apis: RequiredApis
    delete_protection: bool = True
    """Protect its own database from deletion, as the ledger is."""
    requirements: tuple[str, ...] = ()
    """Lines its archive's requirements.txt gains (`store_requirements`: the valkey client for a
    team on Valkey)."""

    @classmethod
    def of(
        cls,
        team: Team,
        ledger: DedupStore,
        invoker_email: str,
        apis: RequiredApis,
        graces: Mapping[str, int],
    ) -> WatchdogProps:
        """The watchdog of `team`, watching every scheduled job; `graces` gives each job's grace."""
        return cls(
            project=team.project,
            region=team.region,
            team=team.name,
            ledger=ledger,
            location=team.location,
            jobs=tuple(WatchedJobProps.of(team, job, graces[job.name]) for job in team.scheduled_views),
            invoker_email=invoker_email,
            apis=apis,
            delete_protection=team.delete_protection,
            requirements=store_requirements(team),
        )

    @property
    def catches_up(self) -> bool:
        """Whether it starts missed runs itself: some watched job has a catch-up window."""
        return any(job.catch_up_seconds > 0 for job in self.jobs)

    @property
    def pauses(self) -> bool:
        """Whether it may pause a Scheduler job: some watched job has `pause_after_failures`."""
        return any(job.pause_after_failures > 0 for job in self.jobs)

    @property
    def retention_seconds(self) -> int:
        """How long its own records are kept: a day past the longest lookback, so a reported run's
        claim outlives every tick that could find the run again."""
        return max(job.lookback_seconds for job in self.jobs) + 24 * 3600


class Watchdog(Construct):
    """The watchdog's database, account and grants; `deploy` adds its function and Scheduler job."""

    def __init__(self, scope: Construct, id: str, props: WatchdogProps) -> None:
        super().__init__(scope, id)
        self.props = props
        self.store = DedupStore(
            self,
            "store",
            DedupStoreProps(
                project=props.project,
                database=naming.watchdog_database(props.ledger.props.database),
                location=props.location,
                collection=COLLECTION,
                apis=props.apis,
                delete_protection=props.delete_protection,
            ),
        )
        """Its own database, with the TTL policy on its collection."""
        self.identity = FunctionIdentity(
            self,
            naming.WATCHDOG,
            FunctionIdentityProps(
                project=props.project,
                team=props.team,
                function=naming.WATCHDOG,
                store=self.store,
                apis=props.apis,
            ),
        )
        """Its runtime account, with roles/datastore.user on its own database only."""
        self.ledger_reader = ProjectIamMember(
            self,
            "ledger-reader",
            project=props.project,
            role=defaults.ROLE_LEDGER_READER,
            member=member(self.identity.runtime_email),
            condition=props.ledger.only_this(
                "runonce-ledger-read-only", f"Read only the {props.ledger.props.database} Firestore database"
            ),
        )
        """roles/datastore.viewer on the team's ledger database only."""
        self.catch_up_grants = self._catch_up_grants() if props.catches_up else []
        """What a catch-up needs, only when a watched job has a catch-up window: write access to
        the ledger (its request record) and Scheduler's job runner (`jobs.run`)."""
        self.pause_grants = self._pause_grants() if props.pauses else []
        """What pausing a job needs, only when a watched job has `pause_after_failures`: a custom
        role holding `cloudscheduler.jobs.get` and `jobs.pause` (`defaults.PAUSER_PERMISSIONS`)."""
        self.grants = [
            self.identity.ledger_grant,
            self.ledger_reader,
            *self.catch_up_grants,
            *self.pause_grants,
        ]
        """Every grant of its account, for the stack's IAM wait."""
        self.schedule = ScheduledJob(
            self,
            "schedule",
            ScheduledJobProps(
                project=props.project,
                region=props.region,
                name=naming.scheduler_job_name(props.team, naming.WATCHDOG),
                schedule=TICK_SCHEDULE,
                time_zone="Etc/UTC",
                attempt_deadline_seconds=TIMEOUT_SECONDS,
                retry=TICK_RETRY,
                invoker_email=props.invoker_email,
                apis=props.apis,
                description=f"runonce watchdog of team {props.team}",
            ),
        )
        """Its Scheduler job (created by `deploy`)."""
        for job in props.jobs:
            if not job.checked:
                Annotations.of(self).add_warning(
                    f"watchdog: job {job.job!r} keeps its records {job.lookback_seconds} s, not "
                    f"longer than its grace ({job.grace_seconds} s) and a tick: its missed runs "
                    "cannot be judged; raise its retention_seconds"
                )
        self.function: DeduplicatedFunction | None = None
        """The watchdog's function, once `deploy` ran."""
        self.since: dict[str, StaticResource] = {}
        """Each watched job's `time_static`: when it was deployed, by job name."""

    def _catch_up_grants(self) -> list[ProjectIamMember]:
        """A catch-up writes a request in the team's ledger and asks Scheduler to run the job, as
        `runonce rerun` does (docs/rerun.md): `roles/datastore.user` conditioned on the ledger's
        database, as the read grant is, and `roles/cloudscheduler.jobRunner` on the project, which
        Scheduler grants no narrower (`defaults.ROLE_JOB_RUNNER`). The read grant stays beside
        them, so turning catch-up on or off never leaves a tick without read access."""
        props, account = self.props, member(self.identity.runtime_email)
        return [
            ProjectIamMember(
                self,
                "ledger-writer",
                project=props.project,
                role=defaults.ROLE_LEDGER,
                member=account,
                condition=props.ledger.only_this(
                    "runonce-ledger-catch-up",
                    f"Write catch-up requests in the {props.ledger.props.database} Firestore database",
                ),
            ),
            ProjectIamMember(
                self,
                "job-runner",
                project=props.project,
                role=defaults.ROLE_JOB_RUNNER,
                member=account,
                depends_on=props.apis.of(defaults.API_SCHEDULER),
            ),
        ]

    def _pause_grants(self) -> list[ProjectIamMember]:
        """The custom role `runonce_<team>_pauser` and its grant to the watchdog's account."""
        props = self.props
        role = custom_role(
            self,
            "pauser-role",
            props.project,
            props.team,
            "pauser",
            defaults.PAUSER_PERMISSIONS,
            f"runonce {props.team} watchdog: pause Scheduler jobs",
            "Read and pause Cloud Scheduler jobs (runonce pause_after_failures)",
            props.apis,
        )
        return [
            ProjectIamMember(
                self,
                "job-pauser",
                project=props.project,
                role=role.name,
                member=member(self.identity.runtime_email),
            )
        ]

    def deploy(
        self,
        build: BuildStorage,
        build_email: str,
        iam_settled: Sleep,
        archive_dir: Path,
        scheduled: Mapping[str, CloudSchedulerJob],
    ) -> DeduplicatedFunction:
        """The function (after the stack's IAM wait and every watched job's Scheduler job), the
        invoker's grant on it and the Scheduler job that ticks it."""
        props = self.props
        self.since = {
            job.job: StaticResource(
                self,
                f"{job.job}-since",
                # A new time whenever the runs the watchdog expects change.
                triggers={
                    "scheduler_job": job.scheduler_job,
                    "schedule": job.schedule,
                    "time_zone": job.time_zone,
                    **job.located,
                },
                depends_on=[scheduled[job.job]],
            )
            for job in props.jobs
        }
        archive = build_archive(
            {
                "": FUNCTIONS_DIR / naming.WATCHDOG,
                defaults.RUNONCE_PACKAGE: FUNCTIONS_DIR / defaults.RUNONCE_PACKAGE,
            },
            archive_dir,
            with_requirements(FUNCTIONS_DIR / naming.WATCHDOG, props.requirements, archive_dir),
        )
        self.function = DeduplicatedFunction(
            self,
            "function",
            DeduplicatedFunctionProps(
                spec=FunctionSpec(
                    project=props.project,
                    region=props.region,
                    name=naming.function_name(props.team, naming.WATCHDOG),
                    label=naming.WATCHDOG,
                    source=naming.WATCHDOG,
                    runtime="python312",
                    entry_point="handle",
                    timeout_seconds=TIMEOUT_SECONDS,
                    memory="256Mi",
                    min_instances=0,
                    max_instances=1,
                    environment=self.environment(),
                    description=f"runonce watchdog of team {props.team}",
                ),
                build=build,
                apis=props.apis,
                identity=self.identity,
                build_email=build_email,
                iam_settled=iam_settled,
                archive=archive,
            ),
        )
        grant = self.schedule.grant_invoker(self.function)
        # Not the stack's invoker wait: that one precedes the watched jobs' Scheduler jobs, which
        # this function follows (through `since`).
        self.invoker_settled = Sleep(
            self, "invoker-settled", create_duration=defaults.INVOKER_SETTLE, depends_on=[grant]
        )
        self.schedule.schedule(self.function, after=[grant, self.invoker_settled])
        return self.function

    def environment(self) -> dict[str, str]:
        """Its variables: its own ledger as RUNONCE_*, the team's ledger and the watched jobs."""
        props = self.props
        jobs: Sequence[dict[str, object]] = [
            {
                "job": job.job,
                "scheduler_job": job.scheduler_job,
                "schedule": job.schedule,
                "time_zone": job.time_zone,
                "grace_seconds": job.grace_seconds,
                "lookback_seconds": job.lookback_seconds,
                "catch_up_seconds": job.catch_up_seconds,
                "since": self.since[job.job].rfc3339,
                **job.located,
                **({"pause_after_failures": job.pause_after_failures} if job.pause_after_failures else {}),
                **({"calendar": job.calendar} if job.calendar else {}),
            }
            for job in props.jobs
        ]
        return {
            contract.PROJECT_VARIABLE: props.project,
            contract.DATABASE_VARIABLE: self.store.props.database,
            contract.COLLECTION_VARIABLE: COLLECTION,
            contract.LEASE_VARIABLE: str(TIMEOUT_SECONDS + LEASE_MARGIN_SECONDS),
            contract.RETENTION_VARIABLE: str(props.retention_seconds),
            WATCHDOG_TEAM_VARIABLE: props.team,
            WATCHDOG_LOCATION_VARIABLE: props.region,
            WATCHDOG_LEDGER_DATABASE_VARIABLE: props.ledger.props.database,
            WATCHDOG_LEDGER_COLLECTION_VARIABLE: props.ledger.props.collection,
            WATCHDOG_JOBS_VARIABLE: json.dumps(jobs, separators=(",", ":")),
        }
