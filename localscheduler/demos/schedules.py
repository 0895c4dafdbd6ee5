"""The demo's schedules: one job per overlap policy (docs/schedules/overlap.md) and one caught-up run
(docs/schedules/backfill.md), on real functions-framework instances of the example report job
(functions/report) and the Firestore emulator, delivered by the local Scheduler on an accelerated
clock.

The jobs `allow`, `skip` and `wait` run every minute with a body of `WORK_SECONDS`, longer than
the minute: each one's second run comes while its first still runs, on purpose. The job
`catch-up` has a catch-up window; its first run is never delivered, on purpose. When the
schedule is played, the team's watchdog (`runonce.scheduler.watchdog.check`) ticks with Cloud
Scheduler's API played by the Google APIs stand-in, whose `jobs.run` sends the forced delivery to
the instances, as tests/watchdog/test_catch_up_function.py does; then it ticks again.

Each job's row is judged from the ledger, the job bodies the instance logs show and the effects
in the job's outbox (one document per published report, naming its run key): allow runs every
run once (its bodies may overlap); skip never runs two bodies at once, and each run it skipped
was answered `skipped` and has a skipped record, no body and no effect; wait never runs two
bodies at once, was answered 409 `waiting` while its run before ran, and runs each run once; the
missed run is run once by the catch-up (its record completed with cause `catch_up`), the first
tick reports nothing and a second tick finds nothing missed.

Three more jobs, a row each (localscheduler/verdicts: windows, pauses, exclusions):
- `sync` (functions/sync, instances of its own, overlap `wait`) copies the window since its
  previous run every minute for four runs, under a fault per run (a lost answer, a kill after the
  effect, a kill mid-run, a duplicate delivery): the windows chain with no gap and no overlap,
  each copied once.
- `failing` fails for good every run, `pause_after_failures=2`: the watchdog, ticking after each
  failed run (twice at once after the second), pauses it once through the Scheduler stand-in; a
  later tick reports none of its unrun ticks missed (Scheduler delivers nothing to a paused job,
  and the local Scheduler plays none after 00:02); `runonce resume` (operate.resume) resumes it
  and records who and why, and a tick after that does not pause it again.
- `holiday` excludes New Year's Day in Europe/Berlin: its runs are answered 200 `excluded` and
  recorded so, with no body and no effect, and the watchdog reports none of them missed.
"""

from __future__ import annotations

import itertools
import json
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from pathlib import Path

import requests
from google.cloud import firestore

from emulator.googleapis import GoogleApisStandIn
from localscheduler.clock import CLOCK_FILE_VARIABLE, AcceleratedClock
from localscheduler.demos.watch import FirestoreSettings
from localscheduler.hosts.pool import InstancePool
from localscheduler.picture import Lane, Mark, Point, lanes
from localscheduler.scheduler.cloud_scheduler import LocalScheduler, Trigger
from localscheduler.scheduler.delivery import Answer, scheduler_headers
from localscheduler.scheduler.faults import Fault, FaultMix
from localscheduler.scheduler.journal import Journal, Sent
from localscheduler.scheduler.plan import PlannedRun, planned_runs
from localscheduler.store import RUNS_COLLECTION, FirestoreLedger, StoreView
from localscheduler.verdicts.bodies import Body, read_bodies
from localscheduler.verdicts.effects import FirestoreEffects
from localscheduler.verdicts.exclusions import ExcludedRun, ExclusionSeen
from localscheduler.verdicts.pauses import PauseSeen, Tick
from localscheduler.verdicts.windows import Copy, WindowRun, WindowsSeen
from operate.rerun import SchedulerApi, Target
from operate.resume import resume
from runonce import contract
from runonce._instant import parse_instant
from runonce.contract import SKIPPED_FOR_FIELD, Excluded, MissedRun, Overlap
from runonce.core.store import CAUSE_FIELD, Store, StoredResult
from runonce.scheduler.expected import next_time
from runonce.scheduler.watchdog import Watch, WatchedJob, check
from stacks.naming import scheduler_job_name
from stacks.team import Calendar, Job, Retry, Team

RATE = 30.0
"""Simulated seconds per wall second: a minute of schedule in two wall seconds."""
START = datetime(2026, 1, 1, 0, 0, 30, tzinfo=UTC)
SPAN = timedelta(seconds=90)
"""Two runs of each job: 00:01 and 00:02."""
WORK_SECONDS = 100
"""Each body's duration (simulated seconds), longer than the schedule's minute."""
LEASE_SECONDS = 150
"""The run lease (simulated seconds): longer than a body, so no live run is taken over."""
FORCED_SKEW_SECONDS = 5
"""The instances' forced skew (simulated seconds): the default minute would take a forced
delivery, which carries the next minute, for that minute's scheduled run."""
CATCH_UP_SECONDS = 600
GRACE = timedelta(seconds=60)
"""The watchdog's grace for the catch-up job (simulated): a run a minute past is missed."""
TICK = START + SPAN + GRACE
"""When the watchdog ticks (simulated): every played run is past its grace, and no run the demo
did not play is (the clock runs on while the last bodies end)."""
INSTANCES = 6
"""The instances the jobs on functions/report share: four bodies run at once at 00:02, plus the
short requests of the others."""
OUTBOX = "schedules_outbox"
WATCHDOG_COLLECTION = "schedules_watchdog"
CATCH_UP_JOB = "catch-up"
SETTLE_SECONDS = 30.0
"""How long (wall) the caught-up run may take to complete."""
SYNC_JOB = "sync"
SYNC_SPAN = timedelta(minutes=4)
"""Four runs of the incremental job: 00:01 to 00:04."""
SYNC_LEASE_SECONDS = 30
"""Its run lease (simulated): a killed attempt is taken over within its retries, before the next run."""
SYNC_INSTANCES = 3
"""Its own instances (functions/sync): two of them die on purpose."""
SYNC_OUTBOX = "schedules_sync_outbox"
SYNC_FAULTS = {
    1: Fault.LOST_RESPONSE,
    2: Fault.KILLED_AFTER_EFFECT,
    3: Fault.INSTANCE_KILLED,
    4: Fault.DUPLICATE_DELIVERY,
}
"""The fault on each of its runs' first attempt, by minute."""
FAILING_JOB = "failing"
PAUSE_AFTER = 2
PAUSE_GRACE = timedelta(seconds=20)
"""The watchdog's grace for the failing job: its run is judged 20 s after its time."""
PAUSE_TICKS = ((START + timedelta(seconds=70), 1), (START + timedelta(seconds=130), 2))
"""When the watchdog ticks while the failing job runs (after its 1st failed run, then twice at once
after its 2nd), and how many ticks then."""
PAUSED_TICK = START + timedelta(minutes=4)
"""A tick after two of the paused job's ticks (00:03, 00:04) passed unrun."""
RESUMER = "demo-operator"
RESUME_WHY = "the revoked credential is renewed"
CALENDAR_JOB = "holiday"
HOLIDAY = START.date()
# Retried every 5 simulated seconds until the next scheduled run (no count limit): a waiting run
# is tried again soon after the run before it ends.
RETRY = Retry(
    retry_count=0,
    max_retry_duration_seconds=55,
    min_backoff_seconds=5,
    max_backoff_seconds=5,
    max_doublings=0,
)


def _job(name: str, overlap: Overlap, work: float, catch_up: int = 0) -> Job:
    return Job(
        name=name,
        schedule="* * * * *",
        source="report",
        body=json.dumps({"work_seconds": round(work / RATE, 3)}),
        attempt_deadline_seconds=180,
        timeout_seconds=LEASE_SECONDS - 30,
        retry=RETRY,
        overlap=overlap,
        catch_up_seconds=catch_up,
    )


POLICY_JOBS = ("allow", "skip", "wait", CATCH_UP_JOB)
"""The jobs of the table's first rows (`JobSeen`)."""


def schedules_team(project: str) -> Team:
    """The section's team: a job per overlap policy, the catch-up job, the incremental job, the
    job paused after failures and the calendar job."""
    failing = _job(FAILING_JOB, Overlap.ALLOW, 0)
    return Team(
        name="schedules",
        project=project,
        region="europe-west1",
        jobs=[
            _job("allow", Overlap.ALLOW, WORK_SECONDS),
            _job("skip", Overlap.SKIP, WORK_SECONDS),
            _job("wait", Overlap.WAIT, WORK_SECONDS),
            _job(CATCH_UP_JOB, Overlap.ALLOW, 0, CATCH_UP_SECONDS),
            replace(_job(SYNC_JOB, Overlap.WAIT, 0), source="sync", body="{}"),
            replace(failing, body=json.dumps({"fail": "permanent"}), pause_after_failures=PAUSE_AFTER),
            replace(
                _job(CALENDAR_JOB, Overlap.ALLOW, 0), time_zone="Europe/Berlin", exclude=Calendar([HOLIDAY])
            ),
        ],
    )


@dataclass(frozen=True)
class PlannedFaults(FaultMix):
    """The section's faults: a chosen fault on the first attempt of chosen runs, none elsewhere."""

    planned: tuple[tuple[str, datetime, Fault], ...] = ()
    """(job, schedule time, fault)."""

    def __post_init__(self) -> None:
        """Nothing to check: the rates stay 0, the faults are planned."""

    def fault_for(self, run: PlannedRun, forced: bool = False) -> Fault:
        """The fault planned for the run's first attempt, or Fault.NONE."""
        if forced:
            return Fault.NONE
        found = (f for job, at, f in self.planned if job == run.job.name and at == run.schedule_time)
        return next(found, Fault.NONE)


FAULTS = PlannedFaults(
    planned=tuple(
        (SYNC_JOB, START.replace(second=0) + timedelta(minutes=minute), fault)
        for minute, fault in SYNC_FAULTS.items()
    )
)


@dataclass(frozen=True)
class RunSeen:
    """One scheduled run of a job and what happened to it."""

    schedule_time: datetime
    key: str
    missed: bool
    """Never delivered on purpose (the catch-up's run)."""
    sent: list[Sent]
    """The local Scheduler's deliveries of it."""
    record: dict
    """Its ledger record ({}: none)."""
    bodies: list[Body]
    effects: int


@dataclass(frozen=True)
class CatchUpSeen:
    """The watchdog's two ticks and the forced delivery its catch-up started."""

    first: dict[str, int]
    second: dict[str, int]
    answers: list[Answer]
    """What the forced delivery(ies) got back."""


@dataclass(frozen=True)
class JobSeen:
    """One job's runs, judged by its policy."""

    name: str
    overlap: Overlap
    runs: list[RunSeen]
    catch_up: CatchUpSeen | None = None

    @property
    def bodies(self) -> list[Body]:
        return [body for run in self.runs for body in run.bodies]

    @property
    def skipped(self) -> list[RunSeen]:
        """The runs answered `skipped`."""
        return [run for run in self.runs if any(sent.outcome == "skipped" for sent in run.sent)]

    @property
    def waiting(self) -> int:
        """Deliveries answered 409 `waiting`."""
        return sum(sent.status == 409 and sent.outcome == "waiting" for run in self.runs for sent in run.sent)

    @property
    def overlapped(self) -> bool:
        """Two of its bodies ran at the same time."""
        return any(_overlap(a, b) for a, b in itertools.combinations(self.bodies, 2))

    @property
    def problems(self) -> list[str]:
        """Each way the job broke its policy's guarantee, in words."""
        found: list[str] = []
        skipped = self.skipped
        for run in self.runs:
            where = f"{self.name} {run.schedule_time:%H:%M}Z"
            if run in skipped:
                if run.record.get("status") != "skipped" or not run.record.get(SKIPPED_FOR_FIELD):
                    found.append(f"{where} was answered skipped without a skipped record")
                if run.bodies or run.effects:
                    found.append(
                        f"{where} was skipped yet ran {len(run.bodies)} bodies, {run.effects} effects"
                    )
                continue
            if not run.missed and not any(sent.acknowledged for sent in run.sent):
                found.append(f"{where} never got a 2xx")
            if run.record.get("status") != "completed":
                found.append(f"{where} ended {run.record.get('status', 'without a record')}")
            if len(run.bodies) != 1 or run.effects != 1:
                found.append(f"{where} ran {len(run.bodies)} bodies and had {run.effects} effects")
        if self.overlap is not Overlap.ALLOW and self.overlapped:
            found.append(f"{self.name} ran two bodies at once")
        if self.overlap is Overlap.SKIP and not skipped:
            found.append(f"{self.name} skipped nothing: its runs did not overlap")
        if self.overlap is Overlap.WAIT and not self.waiting:
            found.append(f"{self.name} was never answered 409 waiting: its runs did not overlap")
        if self.catch_up is not None:
            found.extend(self._catch_up_problems(self.catch_up))
        return found

    def _catch_up_problems(self, seen: CatchUpSeen) -> list[str]:
        found = []
        for run in (run for run in self.runs if run.missed):
            if run.sent:
                found.append(f"{self.name} {run.schedule_time:%H:%M}Z was delivered on schedule")
            if run.record.get(CAUSE_FIELD) != "catch_up":
                found.append(f"{self.name} {run.schedule_time:%H:%M}Z was not run by the catch-up")
        if (seen.first.get("caught_up"), seen.first.get("reported")) != (1, 0):
            found.append(
                f"the first tick caught up {seen.first.get('caught_up')}, reported {seen.first['reported']}"
            )
        if seen.second.get("missed") or seen.second.get("reported") or seen.second.get("caught_up"):
            found.append(f"a second tick found {seen.second}")
        if not any(answer.ok for answer in seen.answers):
            found.append("the catch-up's forced delivery never got a 2xx")
        return found

    @property
    def ok(self) -> bool:
        return not self.problems

    def row(self) -> str:
        caught = sum(run.record.get(CAUSE_FIELD) == "catch_up" for run in self.runs)
        return (
            f"{self.name:<10}{self.overlap.value:<8}{len(self.runs):>5}{len(self.bodies):>8}"
            f"{sum(run.effects for run in self.runs):>9}{len(self.skipped):>9}{self.waiting:>13}"
            f"{caught:>11}{'yes' if self.overlapped else 'no':>12}{'ok' if self.ok else 'FAIL':>9}"
        )


def _overlap(a: Body, b: Body) -> bool:
    """Two bodies ran at the same time (a body that never ended runs on)."""
    far = datetime.max.replace(tzinfo=UTC)
    return a.started < (b.ended or far) and b.started < (a.ended or far)


HEADER = (
    f"{'job':<10}{'policy':<8}{'runs':>5}{'bodies':>8}{'effects':>9}{'skipped':>9}{'409 waiting':>13}"
    f"{'caught up':>11}{'overlapped':>12}{'verdict':>9}"
)


Feature = WindowsSeen | PauseSeen | ExclusionSeen
"""A row of the second table: the previous run, the pause after failures, the calendar."""

FEATURE_HEADER = f"{'row':<10}{'job':<10}{'what happened':<100}{'verdict':>8}"


def feature_row(feature: Feature) -> str:
    """One row of the second table."""
    return f"{feature.name:<10}{feature.job:<10}{feature.summary():<100}{'ok' if feature.ok else 'FAIL':>8}"


@dataclass(frozen=True)
class SchedulesSeen:
    """The section's rows: a job per overlap policy and the catch-up; then a row per feature."""

    jobs: list[JobSeen]
    features: list[Feature]

    @property
    def ok(self) -> bool:
        return all(job.ok for job in self.jobs) and all(feature.ok for feature in self.features)


def render(seen: SchedulesSeen) -> str:
    """The two tables and the verdict lines."""
    jobs, features = seen.jobs, seen.features
    lines = [HEADER, "-" * len(HEADER), *(job.row() for job in jobs)]
    if all(job.ok for job in jobs):
        lines.append(
            "allow ran every run once; skip and wait never ran two at once (skip recorded what it skipped, "
            "wait ran each run once); the missed run was run once by the catch-up, and not reported"
        )
    lines.extend(f"  FAIL {problem}" for job in jobs for problem in job.problems)
    lines += ["", FEATURE_HEADER, "-" * len(FEATURE_HEADER), *(feature_row(feature) for feature in features)]
    if features and all(feature.ok for feature in features):
        lines.append(
            "previous: the windows chained from the start with no gap and no overlap, each copied once, "
            "under a lost answer and kills; pause: paused once after the 2nd failed run, not the 1st, its "
            "unrun ticks not reported, resumed by runonce resume with who and why; calendar: every run on "
            "the excluded date answered 200 excluded and recorded so, no body, no effect, none missed"
        )
    lines.extend(f"  FAIL {problem}" for feature in features for problem in feature.problems)
    return "\n".join(lines)


class StandInScheduler:
    """Cloud Scheduler as the watchdog calls it (`jobs.run`, `jobs.pause`, `jobs.get`), on the
    Google APIs stand-in."""

    def __init__(self, stand_in: GoogleApisStandIn):
        self.url = stand_in.url

    def _session(self) -> requests.Session:
        session = requests.Session()
        session.trust_env = False  # loopback, never through a proxy
        return session

    def run(self, job: str) -> None:
        """Run the job now (POST /v1/{job}:run)."""
        with self._session() as session:
            session.post(f"{self.url}/v1/{job}:run", timeout=30).raise_for_status()

    def pause(self, job: str) -> None:
        """Pause the job (POST /v1/{job}:pause)."""
        with self._session() as session:
            session.post(f"{self.url}/v1/{job}:pause", timeout=30).raise_for_status()

    def paused_since(self, job: str) -> datetime | None:
        """When the job was paused (its `userUpdateTime` while its `state` is PAUSED), or None."""
        with self._session() as session:
            answer = session.get(f"{self.url}/v1/{job}", timeout=30)
        answer.raise_for_status()
        body = answer.json()
        if body.get("state") != "PAUSED":
            return None
        return parse_instant(body["userUpdateTime"]).utc


@dataclass
class SchedulesHarness:
    """The section's instances, scheduler and watchdog: start(), play(), judge(), stop()."""

    project: str
    emulator_host: str
    log_dir: Path
    team: Team = field(init=False)
    pool: InstancePool = field(init=False)
    sync_pool: InstancePool = field(init=False)
    stand_in: GoogleApisStandIn = field(default_factory=GoogleApisStandIn)
    clock: AcceleratedClock | None = None
    journal: Journal | None = None
    answers: list[Answer] = field(default_factory=list)
    forced: list[tuple[datetime, datetime]] = field(default_factory=list)
    """When each forced delivery of the catch-up was sent and answered (simulated)."""
    ticks: list[dict[str, int]] = field(default_factory=list)
    pause_ticks: list[Tick] = field(default_factory=list)
    paused_tick: dict[str, int] = field(default_factory=dict)
    resumed_tick: dict[str, int] = field(default_factory=dict)
    resumed_key: str = ""
    calendar_tick: dict[str, int] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.team = schedules_team(self.project)
        env = {
            contract.PROJECT_VARIABLE: self.project,
            "FIRESTORE_EMULATOR_HOST": self.emulator_host,
            contract.LEASE_VARIABLE: str(LEASE_SECONDS),
            contract.FORCED_SKEW_VARIABLE: str(FORCED_SKEW_SECONDS),
            CLOCK_FILE_VARIABLE: str(self.clock_file),
            "REPORT_OUTBOX_COLLECTION": OUTBOX,
        }
        job = self.team.jobs[0]
        self.pool = InstancePool(
            "schedules", job.source_dir / "main.py", job.entry_point, INSTANCES, env, self.log_dir
        )
        sync = self._job(SYNC_JOB)
        sync_env = {
            **env,
            contract.LEASE_VARIABLE: str(SYNC_LEASE_SECONDS),
            "SYNC_OUTBOX_COLLECTION": SYNC_OUTBOX,
            "SYNC_START": START.isoformat(),
        }
        self.sync_pool = InstancePool(
            "schedules-sync",
            sync.source_dir / "main.py",
            sync.entry_point,
            SYNC_INSTANCES,
            sync_env,
            self.log_dir,
        )

    def _job(self, name: str) -> Job:
        return next(job for job in self.team.jobs if job.name == name)

    def _pool(self, job: Job) -> InstancePool:
        return self.sync_pool if job.name == SYNC_JOB else self.pool

    @property
    def clock_file(self) -> Path:
        return self.log_dir / "clock"

    def start(self) -> None:
        """Write a clock (replaced by play's) and start the instances."""
        self.log_dir.mkdir(parents=True, exist_ok=True)
        self.clock_file.write_text(AcceleratedClock.starting_now(START, RATE).spec())
        self.pool.start()
        self.sync_pool.start()
        self.stand_in.start()

    def plan(self) -> list[Trigger]:
        """Every job's runs in the span; the catch-up job's first run is never delivered."""
        plan = []
        for job in self.team.jobs:
            runs = planned_runs(self.team, job, START, START + (SYNC_SPAN if job.name == SYNC_JOB else SPAN))
            for n, run in enumerate(runs):
                miss = MissedRun.NEVER_DELIVERED if job.name == CATCH_UP_JOB and n == 0 else None
                plan.append(Trigger(run, False, run.schedule_time, run.next_time, miss))
        return sorted(plan, key=lambda trigger: trigger.at)

    def play(self) -> None:
        """Play the schedule while the watchdog ticks on the failing job; then tick it twice for
        the catch-up (waiting for the caught-up run between), once on the paused job and once on
        the calendar job; then resume the paused job with `runonce resume` and tick once more."""
        self.clock = clock = AcceleratedClock.starting_now(START, RATE)
        self.clock_file.write_text(clock.spec())
        client = firestore.Client(project=self.project)
        self.journal = Journal(self.log_dir / "scheduler.jsonl")
        pools = {(self.team.name, job.name): self._pool(job) for job in self.team.jobs}
        leases = {key: SYNC_LEASE_SECONDS if key[1] == SYNC_JOB else LEASE_SECONDS for key in pools}
        runs = FirestoreLedger(client)
        ledger, claims = FirestoreSettings(
            self.emulator_host, self.project, RUNS_COLLECTION, WATCHDOG_COLLECTION
        ).stores()
        scheduler = StandInScheduler(self.stand_in)
        failing = self._job(FAILING_JOB)
        pause_watch = Watch(self.team.name, self.team.project, self.team.region, (self._watched(failing),))
        self.stand_in.clock = lambda: clock.now().strftime("%Y-%m-%dT%H:%M:%SZ")
        self.stand_in._store(  # the Scheduler job as the stack created it, enabled
            {
                "name": pause_watch.scheduler_job(pause_watch.jobs[0]),
                "state": "ENABLED",
                "userUpdateTime": "2026-01-01T00:00:00Z",
            }
        )
        stop = threading.Event()
        ticker = threading.Thread(
            target=self._tick_failing, args=(pause_watch, ledger, claims, scheduler, stop), daemon=True
        )
        ticker.start()
        try:
            LocalScheduler(clock, pools, leases, FAULTS, runs, self.journal).run(self.plan())
        finally:
            stop.set()
            ticker.join()
        self.journal.close()
        catch_up = next(job for job in self.team.jobs if job.name == CATCH_UP_JOB)
        self.stand_in.on_start = lambda started: threading.Thread(
            target=self._forced_delivery, args=(catch_up,), daemon=True
        ).start()
        watch = self._watch(catch_up)
        self.ticks.append(check(watch, ledger, claims, TICK, scheduler))
        missed = next(t.key for t in self.plan() if t.miss is not None)
        deadline = time.monotonic() + SETTLE_SECONDS
        while (ledger.read(missed) or {}).get("status") != "completed" and time.monotonic() < deadline:
            time.sleep(0.2)
        self.ticks.append(check(watch, ledger, claims, TICK, scheduler))
        self.calendar_tick = check(self._watch(self._job(CALENDAR_JOB)), ledger, claims, TICK, scheduler)
        clock.sleep_until(PAUSED_TICK, threading.Event())
        self.paused_tick = check(pause_watch, ledger, claims, PAUSED_TICK, scheduler)
        self._resume(failing, ledger)
        self.resumed_tick = check(pause_watch, ledger, claims, clock.now(), scheduler)

    def _watched(self, job: Job) -> WatchedJob:
        return WatchedJob(
            job=job.name,
            scheduler_job=scheduler_job_name(self.team.name, job.name),
            schedule=job.schedule,
            time_zone=job.time_zone,
            grace=PAUSE_GRACE if job.pause_after_failures else GRACE,
            lookback=timedelta(hours=1),
            since=START,
            catch_up=timedelta(seconds=job.catch_up_seconds),
            pause_after_failures=job.pause_after_failures,
            calendar=job.calendar,
        )

    def _watch(self, job: Job) -> Watch:
        return Watch(self.team.name, self.team.project, self.team.region, (self._watched(job),))

    def _tick_failing(
        self, watch: Watch, ledger: Store, claims: Store, scheduler: StandInScheduler, stop: threading.Event
    ) -> None:
        """The watchdog's ticks while the failing job runs: at each of PAUSE_TICKS, that many at once."""
        assert self.clock is not None
        job = watch.jobs[0]
        for at, count in PAUSE_TICKS:
            if not self.clock.sleep_until(at, stop):
                return
            keys = [trigger.key for trigger in self.plan() if trigger.run.job.name == job.job]
            failed = sum((ledger.read(key) or {}).get("status") == "failed" for key in keys)
            with ThreadPoolExecutor(max_workers=count) as pool:
                moments = [at] * count
                ticks = list(pool.map(lambda when: check(watch, ledger, claims, when, scheduler), moments))
            self.pause_ticks.extend(Tick(at, counts, failed) for counts in ticks)

    def _resume(self, job: Job, ledger: Store) -> None:
        """`runonce resume --team schedules --job failing --by RESUMER --why RESUME_WHY`, in process."""
        assert self.clock is not None
        api = SchedulerApi(self.stand_in.url)
        done = resume(api, ledger, Target.of(self.team, job), RESUMER, RESUME_WHY, self.clock.now())
        self.resumed_key = done.key

    def _forced_delivery(self, job: Job) -> None:
        """What `jobs.run` makes Cloud Scheduler send: a delivery carrying the job's next
        scheduled time (past the forced skew, so the instances can tell it is forced)."""
        assert self.clock is not None
        after = self.clock.now() + timedelta(seconds=FORCED_SKEW_SECONDS)
        upcoming = next_time(job.schedule, job.time_zone, after)
        headers = scheduler_headers(self.team, job, upcoming)
        sent_at = self.clock.now()
        self.answers.append(self.pool.post("", headers, self.clock.wall_seconds(180), 30.0))
        self.forced.append((sent_at, self.clock.now()))

    def lanes(self) -> list[Lane]:
        """The picture's lanes of the section's runs (`localscheduler.picture`); the missed run's
        lane also shows the forced delivery the catch-up started."""
        assert self.clock is not None and self.journal is not None
        client = firestore.Client(project=self.project)
        writers = FirestoreEffects(OUTBOX, "run_key", "attempt_id").read(client)
        drawn = lanes(self.plan(), self.journal, read_bodies(self.log_dir, self.clock), writers)
        missed = next(t for t in self.plan() if t.miss is not None)
        after = [((a - missed.at).total_seconds(), (b - missed.at).total_seconds()) for a, b in self.forced]
        return [
            replace(
                lane,
                points=lane.points + tuple(Point(start, Mark.CAUGHT_UP) for start, _ in after),
                spans=lane.spans + tuple(after),
            )
            if any(point.mark is Mark.NOT_DELIVERED for point in lane.points)
            else lane
            for lane in drawn
        ]

    def judge(self) -> SchedulesSeen:
        """Each row from the journal, the ledger, the instance logs, the outboxes, the Scheduler
        stand-in and the watchdog's ticks."""
        assert self.clock is not None and self.journal is not None
        client = firestore.Client(project=self.project)
        outbox = FirestoreEffects(OUTBOX, "run_key", "attempt_id")
        view = StoreView.read(client, [outbox], FirestoreLedger(client))
        bodies = read_bodies(self.log_dir, self.clock)
        sent = self.journal.sent()
        seen: dict[str, list[RunSeen]] = {}
        for trigger in self.plan():
            name = trigger.run.job.name
            seen.setdefault(name, []).append(
                RunSeen(
                    trigger.run.schedule_time,
                    trigger.key,
                    trigger.miss is not None,
                    [s for s in sent if s.job == name and s.schedule_time == trigger.run.schedule_time],
                    view.records.get(trigger.key, {}),
                    bodies.get(trigger.key, []),
                    len(view.effects.get(trigger.key, [])),
                )
            )
        jobs = []
        for job in (self._job(name) for name in POLICY_JOBS):
            catch_up = (
                CatchUpSeen(self.ticks[0], self.ticks[1], self.answers) if job.name == CATCH_UP_JOB else None
            )
            jobs.append(JobSeen(job.name, job.overlap, seen[job.name], catch_up))
        return SchedulesSeen(jobs, [self._windows(client, seen), self._pause(seen), self._calendar(seen)])

    def _windows(self, client: firestore.Client, seen: dict[str, list[RunSeen]]) -> WindowsSeen:
        copies = []
        for document in client.collection(SYNC_OUTBOX).stream():
            copy = document.to_dict() or {}
            since, until = (
                parse_instant(str(copy.get("since"))).utc,
                parse_instant(str(copy.get("until"))).utc,
            )
            copies.append(Copy(since, until, str(copy.get("run_key"))))
        runs = [WindowRun(run.schedule_time, run.key, run.record, run.sent) for run in seen[SYNC_JOB]]
        return WindowsSeen(SYNC_JOB, START, runs, copies)

    def _pause(self, seen: dict[str, list[RunSeen]]) -> PauseSeen:
        job = self._job(FAILING_JOB)
        name = self._watch(job).scheduler_job(self._watched(job))
        pauses = sum(call.path == f"/v1/{name}:pause" for call in self.stand_in.calls)
        record = (
            FirestoreLedger(firestore.Client(project=self.project)).read(self.resumed_key)
            if self.resumed_key
            else None
        )
        resumed = StoredResult.from_record(record).value if record else {}
        state = next(
            (r.get("state", "") for r in self.stand_in.resources("jobs") if r.get("name") == name), ""
        )
        return PauseSeen(
            FAILING_JOB,
            PAUSE_AFTER,
            [run.record.get("status", "") for run in seen[FAILING_JOB]],
            self.pause_ticks,
            pauses,
            self.paused_tick,
            resumed if isinstance(resumed, dict) else {},
            str(state),
            self.resumed_tick,
            RESUMER,
            RESUME_WHY,
        )

    def _calendar(self, seen: dict[str, list[RunSeen]]) -> ExclusionSeen:
        runs = [
            ExcludedRun(run.schedule_time, run.sent, run.record, len(run.bodies), run.effects)
            for run in seen[CALENDAR_JOB]
        ]
        return ExclusionSeen(CALENDAR_JOB, Excluded.EXCLUDED_DATE.value, runs, self.calendar_tick)

    def pids(self) -> list[int]:
        return self.pool.pids() + self.sync_pool.pids()

    def stop(self) -> None:
        self.pool.stop()
        self.sync_pool.stop()
        self.stand_in.stop()


def play_schedules(harness: SchedulesHarness) -> SchedulesSeen:
    """Start the harness, play it and judge it (the caller stops it)."""
    harness.start()
    harness.play()
    return harness.judge()
