"""The demo's Valkey section: the team files' teams on Valkey (`Team(store=Valkey(...))`, left out of
the Firestore sections) played on a Valkey server the section starts (`valkey-server`, else Debian's
`redis-server`; `make demo` installs it when neither is there), named to their instances by
RUNONCE_STORE, and judged as every other job is. With no such team in the team files it plays the
example job (functions/report, every minute) and the example event function instead.

The scheduled jobs play with the demo's fault mix in their own `Simulation` (effects in the
Firestore emulator, as everywhere) at a rate of their own: the server judges leases on its own
clock, at wall speed, so the instances get the lease in whole wall seconds, and the section plays at
the rate at which one wall second is the shortest lease the jobs have on Firestore (81 s of
schedule for ledger/close, whose last retry comes at 135 s; 15 s for the example job, whose last
retry comes at 25 s), WALL_SECONDS of it. The event jobs are `EventHarness`es whose ledger is on the
server, played beside the other event jobs: a team's push event jobs with the team files' event
mix, or the example event function with the demo's. Each job is one verdict row, and any failing
fails the demo. The local server has no replica: the deployed URL's `replicas` is left out.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

from emulator.valkey import ValkeyServer
from localscheduler.demos.events import DEMO_MIX, EXAMPLE, TEAM_CONFIG, TEAM_MIX, EventFunction, EventHarness
from localscheduler.demos.simulation import Result, Simulation, simulation_lease
from localscheduler.scheduler.faults import FaultMix
from localscheduler.scheduler.plan import planned_runs
from localscheduler.verdicts.scheduled import failures, fault_summary, guarantee_summary, render
from stacks.team import PUSH, Job, Retry, Team

START = datetime(2026, 3, 29, 0, 55, tzinfo=UTC)
WALL_SECONDS = 40.0
"""The wall time of the scheduled jobs' schedule (their instances' start and last retries aside)."""
FASTEST = 120.0
"""The rate is never above the demo's."""
EXAMPLE_TEAM = Team(
    name="valkey",
    project="runonce-valkey",
    region="europe-west1",
    jobs=[
        Job(
            name="report",
            schedule="* * * * *",
            source="report",
            timeout_seconds=30,
            attempt_deadline_seconds=15,
            # Retries at 1, 3, 7, 15 and 25 s: the last one takes over a killed attempt's run.
            retry=Retry(retry_count=5, min_backoff_seconds=1, max_backoff_seconds=10, max_doublings=3),
        )
    ],
)
EXAMPLE_EVENT_JOB = "valkey/events-example"


def section_rate(teams: list[Team]) -> float:
    """Simulated seconds per wall second at which a one-second lease on the server is the shortest
    lease the teams' jobs get on Firestore (whole seconds, at most FASTEST)."""
    leases = [
        simulation_lease(job, planned_runs(team, job, START, START + timedelta(hours=1)))
        for team in teams
        for job in team.jobs
    ]
    return float(min([FASTEST, *leases]))


class ValkeySection:
    """The server, the scheduled jobs' simulation and the event jobs' harnesses: `start()`, then
    `play_scheduled()`, and the harnesses (`events`) played with the other event jobs."""

    def __init__(
        self,
        project: str,
        emulator_host: str,
        log_dir: Path,
        faults: FaultMix,
        seed: int,
        teams: list[Team],
        wall_seconds: float = WALL_SECONDS,
    ):
        """`teams`: the team files' teams on Valkey (none: the example job and event function)."""
        self.project = project
        self.emulator_host = emulator_host
        self.log_dir = log_dir
        self.faults = faults
        self.seed = seed
        self.teams = teams or [EXAMPLE_TEAM]
        self.rate = section_rate(self.teams)
        self.span = timedelta(minutes=max(1, round(self.rate * wall_seconds / 60)))
        self.server: ValkeyServer | None = None
        self.sim: Simulation | None = None
        self.events: list[EventHarness] = []

    @property
    def name(self) -> str:
        """What the demo's messages call the server."""
        return ValkeyServer.name

    @property
    def port(self) -> int:
        """The server's port (0 before it started)."""
        return 0 if self.server is None else self.server.port

    def start(self) -> str:
        """Start the server (EmulatorUnavailable, naming what to install, if there is none) and
        build the jobs on it; the server's URL."""
        self.server = ValkeyServer()
        url = self.server.url
        self.sim = Simulation(
            self.teams,
            START,
            self.span,
            self.rate,
            self.faults,
            self.log_dir / "scheduled",
            self.project,
            self.emulator_host,
            instances_per_job=3,
            store=url,
        )
        self.events = [
            EventHarness(
                f"{team.name}/{job.name}",
                EventFunction.of(job),
                TEAM_MIX,
                self.seed,
                self.project,
                self.log_dir / f"{team.name}-{job.name}",
                TEAM_CONFIG,
                store=url,
            )
            for team in self.teams
            for job in team.event_jobs
            if job.trigger == PUSH
        ] or [
            EventHarness(
                EXAMPLE_EVENT_JOB,
                EXAMPLE,
                DEMO_MIX,
                self.seed,
                self.project,
                self.log_dir / "events",
                store=url,
            )
        ]
        return url

    def play_scheduled(self) -> Result:
        """Start the scheduled jobs' instances, play their schedule with faults, judge it, and stop
        the instances."""
        assert self.sim is not None, "start() first"
        try:
            self.sim.start_instances()
            return self.sim.run()
        finally:
            self.sim.stop()

    def pids(self) -> list[int]:
        """Instance process groups still running."""
        sim = [] if self.sim is None else self.sim.pids()
        return sim + [pid for harness in self.events for pid in harness.pids()]

    def stop(self) -> None:
        """Stop the instances and the server; safe to call twice."""
        if self.sim is not None:
            self.sim.stop()
        for harness in self.events:
            harness.stop()
        if self.server is not None:
            self.server.stop()


def report(result: Result, url: str, rate: float) -> str:
    """The scheduled jobs' table (a verdict row each), the faults injected, each run that failed
    its verdict, and what the verdict found."""
    title = f"Valkey store (RUNONCE_STORE={url}), at {rate:g}x"
    summary = fault_summary(result.journal) + f"; instances replaced: {result.restarts}"
    return "\n".join(
        [title, render(result.rows), summary, *failures(result.verdicts), *guarantee_summary(result.verdicts)]
    )
