"""The demo's Valkey section: a scheduled job and an event job whose instances keep their runs on a
Valkey server the section starts (`valkey-server`, else Debian's `redis-server`; `make demo` installs
it when neither is there), named to them by RUNONCE_STORE, and judged as every other job is.

The scheduled job is the example's (functions/report), every minute, played with the demo's fault
mix by its own `Simulation` on the Firestore emulator's effects, at RATE: the server judges leases on
its own clock, at wall speed, so the instances get the lease in whole wall seconds, and at 15x the
one-second lease is the 15 s of schedule that ends before the job's last retry (at 25 s). The event
job is the example event function (functions/events_example) with the demo's event mix, an
`EventHarness` whose ledger is on the server; it plays beside the other event jobs. Each is one
verdict row, and either failing fails the demo.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

from emulator.valkey import ValkeyServer
from localscheduler.demos.events import DEMO_MIX, EXAMPLE, EventHarness
from localscheduler.demos.simulation import Result, Simulation
from localscheduler.scheduler.faults import FaultMix
from localscheduler.verdicts.scheduled import failures, fault_summary, guarantee_summary, render
from stacks.team import Job, Retry, Team

RATE = 15.0
"""Simulated seconds per wall second: a one-second lease on the server is 15 s of schedule."""
SPAN = timedelta(minutes=10)
START = datetime(2026, 3, 29, 0, 55, tzinfo=UTC)
TEAM = Team(
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
EVENT_JOB = "valkey/events-example"


class ValkeySection:
    """The server, the scheduled job's simulation and the event job's harness: `start()`, then
    `play_scheduled()` and the event harness (`events`, played with the other event jobs)."""

    def __init__(
        self,
        project: str,
        emulator_host: str,
        log_dir: Path,
        faults: FaultMix,
        seed: int,
        span: timedelta = SPAN,
    ):
        self.project = project
        self.emulator_host = emulator_host
        self.log_dir = log_dir
        self.faults = faults
        self.seed = seed
        self.span = span
        self.server: ValkeyServer | None = None
        self.sim: Simulation | None = None
        self.events: EventHarness | None = None

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
            [TEAM],
            START,
            self.span,
            RATE,
            self.faults,
            self.log_dir / "scheduled",
            self.project,
            self.emulator_host,
            instances_per_job=3,
            store=url,
        )
        self.events = EventHarness(
            EVENT_JOB, EXAMPLE, DEMO_MIX, self.seed, self.project, self.log_dir / "events", store=url
        )
        return url

    def play_scheduled(self) -> Result:
        """Start the scheduled job's instances, play its schedule with faults, judge it, and stop
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
        return sim + ([] if self.events is None else self.events.pids())

    def stop(self) -> None:
        """Stop the instances and the server; safe to call twice."""
        if self.sim is not None:
            self.sim.stop()
        if self.events is not None:
            self.events.stop()
        if self.server is not None:
            self.server.stop()


def report(result: Result, url: str) -> str:
    """The scheduled job's table (its verdict row), the faults injected, each run that failed its
    verdict, and what the verdict found."""
    title = f"Valkey store (RUNONCE_STORE={url}): the example job every minute, at {RATE:g}x"
    summary = fault_summary(result.journal) + f"; instances replaced: {result.restarts}"
    return "\n".join(
        [title, render(result.rows), summary, *failures(result.verdicts), *guarantee_summary(result.verdicts)]
    )
