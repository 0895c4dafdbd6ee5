"""`make demo`: the team files' jobs on the Firestore emulator, delivered with faults, judged;
then the event jobs on the Pub/Sub emulator, published with faults, judged.

Starts the emulator and a pool of functions-framework instances per job, plays the schedule on
an accelerated clock with the fault mix and two runs lost on purpose (one never delivered, one
left with a stuck claim: see localscheduler.scheduler.misses), prints progress, then the table, and draws
every delivery of every run (localscheduler.picture) to build/demo-timeline.png. Then starts the Pub/Sub
emulator and, side by side, the example event function and every push `EventJob` of the team
files, each with its own instances, publishes messages with an event fault mix (see
localscheduler.demos.events) and prints the event table, a row per event job; then the proxied
job (localscheduler.demos.proxy) and the services, Flask and Django on gunicorn and FastAPI on
uvicorn (localscheduler.demos.services), a row each; then the schedules, a job per overlap policy,
a run the watchdog's catch-up starts, the previous run, a pause after failures and a calendar
(localscheduler.demos.schedules), a row each. The Valkey
section (localscheduler.demos.valkey) starts a Valkey server (redis-server where Valkey is not
installed) and plays the example job, after the team files' jobs, and the example event job, beside
the other event jobs, with their runs kept there (RUNONCE_STORE), a row each. Exits 1 if
any run broke the guarantee (see localscheduler.verdicts.scheduled), never finished within its
retry window, any message did not end with exactly one effect or one dead letter (see
localscheduler.verdicts.events), any proxied or service run did not end with exactly one effect
and a 2xx, any schedules row failed its policy's verdict, a Valkey row failed, any team's
watchdog did not report exactly its runs lost on purpose once, or any process it started
outlived it; 130 on Ctrl-C, after stopping everything. The runs lost on purpose are expected
misses: each must go exactly as planned, and then does not fail the demo. Last, while the
Firestore emulator still runs, each team's watchdog ticks twice on the demo's ledger and the demo
ends with `runonce runs` for the job of those runs (see localscheduler.demos.watch).
"""

from __future__ import annotations

import argparse
import atexit
import functools
import os
import signal
import socket
import sys
import tempfile
import threading
import time
from datetime import datetime, timedelta
from pathlib import Path

from emulator.firestore import EmulatorUnavailable, FirestoreEmulator
from emulator.pubsub import PubSubEmulator
from localscheduler.demos.events import (
    DEMO_MIX,
    EXAMPLE,
    TEAM_CONFIG,
    TEAM_MIX,
    EventFunction,
    EventHarness,
    EventResult,
)
from localscheduler.demos.proxy import ProxyHarness, ProxyResult
from localscheduler.demos.schedules import SchedulesHarness, SchedulesSeen, play_schedules
from localscheduler.demos.schedules import render as render_schedules
from localscheduler.demos.services import ServiceHarness, ServiceResult, play_services
from localscheduler.demos.services import render as render_services
from localscheduler.demos.simulation import Result, Simulation
from localscheduler.demos.valkey import ValkeySection
from localscheduler.demos.valkey import report as report_valkey
from localscheduler.demos.watch import FirestoreSettings, watch_missed_runs
from localscheduler.folder_file import FolderFileError
from localscheduler.hosts.service import Service, TeamServices, installed_python, services
from localscheduler.picture import Lane, lanes, save
from localscheduler.scheduler.faults import FaultMix
from localscheduler.scheduler.misses import PlannedMisses
from localscheduler.side_by_side import side_by_side
from localscheduler.verdicts.events import event_summary, render_events
from localscheduler.verdicts.scheduled import failures, fault_summary, guarantee_summary, render
from runonce.contract import MissedRun
from stacks.config.store import Firestore
from stacks.team import PUSH, REPO_ROOT, TEAMS_DIR, Team, load_teams

PROJECT = "runonce-local"
DEFAULT_FAULTS = (
    "duplicate_delivery=0.08,lost_response=0.08,short_deadline=0.06,instance_killed=0.06,"
    "retryable_failure=0.08,permanent_failure=0.03,killed_after_effect=0.05,forced_run=0.05"
)
PROGRESS_SECONDS = 5.0
EVENT_JOB = "events-example"
PROXY_RUNS = 10
SERVICE_RUNS = 6
TIMELINE = REPO_ROOT / "build" / "demo-timeline.png"


def arguments(argv: list[str] | None = None) -> argparse.Namespace:
    """The command line; every option has a default that makes `make demo` a one-minute run."""
    parser = argparse.ArgumentParser(prog="python -m localscheduler", description=__doc__.splitlines()[0])
    parser.add_argument(
        "--rate",
        type=float,
        default=120.0,
        help="simulated seconds per wall second (default 120: two minutes of schedule per second)",
    )
    parser.add_argument("--hours", type=float, default=2.0, help="hours of schedule to play (default 2)")
    parser.add_argument(
        "--start",
        default="2026-03-29T00:00:00+00:00",
        help="simulated start, ISO 8601 (default: the night Europe/Berlin moves to summer time)",
    )
    parser.add_argument(
        "--faults", default=DEFAULT_FAULTS, help="rate per fault, e.g. instance_killed=0.1,..."
    )
    parser.add_argument(
        "--seed", type=int, default=7, help="seed of the fault choice (same seed, same faults)"
    )
    # Three, the team file's default max_instances: with two, the seed's kills of both instances
    # of sync two minutes apart left no instance for a whole retry window when a restart was slow.
    parser.add_argument(
        "--instances", type=int, default=3, help="instances per function, at most max_instances (default 3)"
    )
    parser.add_argument("--teams", type=Path, default=TEAMS_DIR, help="folder of team files (default teams/)")
    parser.add_argument(
        "--never-delivered",
        type=int,
        default=1,
        help="scheduled runs the local Scheduler skips on purpose (default 1)",
    )
    parser.add_argument(
        "--stuck-claims",
        type=int,
        default=1,
        help="runs whose every claiming attempt dies, left in_progress once the retries ran out (default 1)",
    )
    parser.add_argument(
        "--timeline", type=Path, default=TIMELINE, help="the picture's path (default build/demo-timeline.png)"
    )
    return parser.parse_args(argv)


def _progress(sim: Simulation, started: float, planned: int) -> str:
    scheduler = sim.scheduler
    sent = scheduler.journal.sent() if scheduler else []
    now = scheduler.clock.now().strftime("%H:%M") if scheduler else "--:--"
    firsts = sum(s.attempt == 1 and not s.copy for s in sent)
    return (
        f"[{time.monotonic() - started:5.1f}s] schedule {now} UTC | runs sent {firsts}/{planned} | "
        f"deliveries {len(sent)} | 2xx seen {sum(s.acknowledged for s in sent)} | "
        f"409s {sum(s.status == 409 for s in sent)} | instances killed {sum(s.killed for s in sent)}, "
        f"replaced {sum(pool.restarts for pool in sim.pools.values())}"
    )


def _leftovers(
    pids: list[int],
    emulators: list[FirestoreEmulator | PubSubEmulator | ValkeySection],
    patience: float = 5.0,
) -> list[str]:
    """What still runs of what the demo started (instance process groups, the emulators' and the
    Valkey server's ports),
    after giving killed processes `patience` seconds to be reaped."""
    deadline = time.monotonic() + patience
    while True:
        alive = [f"instance process group {pid}" for pid in pids if _group_exists(pid)]
        for emulator in emulators:
            with socket.socket() as sock:
                if sock.connect_ex(("127.0.0.1", emulator.port)) == 0:
                    alive.append(f"{emulator.name} on port {emulator.port}")
        if not alive or time.monotonic() > deadline:
            return alive
        time.sleep(0.2)


def _group_exists(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
        return True
    except ProcessLookupError:
        return False


def _interrupt(signum, frame) -> None:
    raise KeyboardInterrupt


def _report(result: Result, sim: Simulation, args: argparse.Namespace, schedules: list[Lane]) -> None:
    print()
    print(render(result.rows))
    print(fault_summary(result.journal) + f"; instances replaced: {result.restarts}")
    for line in failures(result.verdicts):
        print(line)
    for line in guarantee_summary(result.verdicts):
        print(line)
    print(_timeline(result, sim, args, schedules))
    print(f"logs: {sim.log_dir}")


def _timeline(result: Result, sim: Simulation, args: argparse.Namespace, schedules: list[Lane]) -> str:
    """Draw every delivery of every run (from the scheduler's journal and the store), then the
    schedules section's runs; say where it went, or why it could not be written (the verdict does
    not depend on it)."""
    runs = lanes(result.plan, result.journal, result.bodies, result.writers)
    title = (
        f"make demo: {len(result.journal.sent())} deliveries of {len(runs)} runs, {args.hours:g} h from "
        f"{sim.start:%Y-%m-%d %H:%M} UTC, seed {args.seed}; then {len(schedules)} runs of the schedules"
    )
    try:
        return f"timeline of every delivery: {save(runs + schedules, title, args.timeline)}"
    except OSError as exc:
        return f"timeline not written: {exc} (--timeline PATH picks another place)"


def _served_as(service: Service | None) -> str:
    """How a job's instances run, for the start-up lines: nothing for a function."""
    if service is None:
        return ""
    return f" of {service.source.relative_to(REPO_ROOT)} on {type(service.host).__name__.lower()}"


def _watch(sim: Simulation, result: Result) -> bool:
    """Run the watchdog of every team whose scheduled jobs were served (localscheduler.demos.watch);
    whether each reported exactly its team's planned misses, once."""
    settings = FirestoreSettings(sim.emulator_host, sim.project)
    window = (sim.start, sim.start + sim.span)
    ok = True
    for team in sim.teams:
        leases = {job: result.leases[(name, job)] for name, job in sim.pools if name == team.name}
        if leases:
            expected = [t for t in result.plan if t.miss and t.run.team.name == team.name]
            print()
            ok = watch_missed_runs(team, leases, window, settings, expected) and ok
    return ok


def on_firestore(teams: list[Team], say: bool = False) -> list[Team]:
    """The teams whose runs the demo plays on the Firestore emulator: a team on Valkey
    (`Team.store`) is left out of these sections, whose ledger is Firestore's."""
    kept = [team for team in teams if isinstance(team.store, Firestore)]
    for team in teams:
        if say and team not in kept:
            print(f"  team {team.name}: played in the Valkey section, not on the Firestore emulator")
    return kept


def _event_harnesses(teams: list[Team], seed: int, log_dir: Path) -> list[EventHarness]:
    """The example event job, then every push event job of the team files on Firestore (an Eventarc
    job is a CloudEvent function, which a push subscription cannot serve)."""
    harnesses = [EventHarness(EVENT_JOB, EXAMPLE, DEMO_MIX, seed, PROJECT, log_dir / EVENT_JOB)]
    for team in on_firestore(teams):
        for job in team.event_jobs:
            if job.trigger != PUSH:
                print(f"  {team.name}/{job.name}: not served ({job.trigger} trigger: a CloudEvent function)")
                continue
            name = f"{team.name}/{job.name}"
            folder = log_dir / f"{team.name}-{job.name}"
            harnesses.append(
                EventHarness(name, EventFunction.of(job), TEAM_MIX, seed, PROJECT, folder, TEAM_CONFIG)
            )
    return harnesses


def _play_events(harnesses: list[EventHarness], host: str) -> list[EventResult]:
    """Start the harnesses one at a time, then play them side by side."""
    for harness in harnesses:
        messages = sum(harness.mix.values())
        print(f"  {harness.name}: {harness.config.instances} instances, {messages} messages", flush=True)
        harness.start(host)
    return side_by_side(
        [
            functools.partial(harness.play, progress=lambda line: print(line, flush=True))
            for harness in harnesses
        ]
    )


def _report_events(results: list[EventResult], harnesses: list[EventHarness]) -> None:
    print()
    print(render_events([result.row for result in results]))
    for result, harness in zip(results, harnesses, strict=True):
        print(f"{harness.name}: {result.faults()}")
        for line in result.unsettled:
            print(f"  FAIL after {harness.config.settle_seconds:.0f} s, {line}")
        for line in event_summary(result.verdicts, result.strays):
            print(f"  {line}")
        print(f"  logs: {harness.pool.log_dir}")


def main(argv: list[str] | None = None) -> int:
    """Run the demo; the exit code is the verdict."""
    args = arguments(argv)
    try:
        faults = FaultMix.parse(args.faults, args.seed)
        misses = PlannedMisses(args.never_delivered, args.stuck_claims, args.seed)
    except ValueError as exc:
        print(f"cannot run the demo: {exc}", file=sys.stderr)
        return 2
    start = datetime.fromisoformat(args.start)
    wall = timedelta(hours=args.hours).total_seconds() / args.rate
    print(
        f"runonce demo: {args.hours:g} h of schedule from {start:%Y-%m-%d %H:%M} UTC at {args.rate:g}x "
        f"(about {wall:.0f} s), seed {args.seed}, faults {args.faults}"
    )
    emulator = FirestoreEmulator()
    log_dir = Path(tempfile.mkdtemp(prefix="runonce-demo-"))
    print("building runonce's wheel and installing it in a fresh venv, for the services ...", flush=True)
    python = installed_python(log_dir / "services")
    teams = load_teams(args.teams)
    sim = Simulation(
        on_firestore(teams, say=True),
        start,
        timedelta(hours=args.hours),
        args.rate,
        faults,
        log_dir,
        PROJECT,
        emulator.host,
        args.instances,
        misses,
        team_services=TeamServices(python),
    )
    pubsub = PubSubEmulator()
    try:
        events = _event_harnesses(sim.teams, args.seed, sim.log_dir / "events")
    except FolderFileError as exc:
        print(f"cannot run the demo: {exc}", file=sys.stderr)
        return 2
    proxy = ProxyHarness(PROJECT, emulator.host, sim.log_dir / "proxy", PROXY_RUNS, args.seed)
    service_harnesses: list[ServiceHarness] = []
    schedules = SchedulesHarness(PROJECT, emulator.host, sim.log_dir / "schedules")
    on_valkey = [team for team in teams if team not in sim.teams]
    valkey = ValkeySection(PROJECT, emulator.host, sim.log_dir / "valkey", faults, args.seed, on_valkey)
    started_pids: list[int] = []

    def stop_everything() -> None:
        started_pids.extend(sim.pids() + [pid for harness in events for pid in harness.pids()] + proxy.pids())
        started_pids.extend(pid for service in service_harnesses for pid in service.pids())
        sim.stop()
        for harness in events:
            harness.stop()
        proxy.stop()
        for service in service_harnesses:
            service.stop()
        started_pids.extend(schedules.pids())
        schedules.stop()
        started_pids.extend(valkey.pids())
        valkey.stop()
        pubsub.stop()
        emulator.stop()

    atexit.register(stop_everything)
    signal.signal(signal.SIGTERM, _interrupt)
    signal.signal(signal.SIGINT, _interrupt)
    outcome: list[Result | BaseException] = []
    event_outcome: list[list[EventResult]] = []
    proxy_outcome: list[ProxyResult] = []
    service_outcome: list[list[ServiceResult]] = []
    schedules_outcome: list[SchedulesSeen] = []
    valkey_outcome: list[Result] = []
    watched: list[bool] = []

    def play() -> None:
        try:
            outcome.append(sim.run())
        except BaseException as exc:  # handed to the main thread, which reports it
            outcome.append(exc)

    try:
        print("starting the Firestore emulator ...", flush=True)
        emulator.start()
        os.environ.update(FIRESTORE_EMULATOR_HOST=emulator.host, GOOGLE_CLOUD_PROJECT=PROJECT)
        print("starting the Valkey server (the Valkey section's run store) ...", flush=True)
        valkey_url = valkey.start()
        events.extend(valkey.events)
        print("starting functions-framework instances, and the service jobs' servers ...", flush=True)
        sim.start_instances()
        hosts = {(team.name, job.name): _served_as(service) for team, job, service in sim.served()}
        for (team, job), pool in sim.pools.items():
            print(
                f"  {team}/{job}: {len(pool.instances)} instances{hosts[(team, job)]}, run lease "
                f"{sim.leases[(team, job)]} s of schedule ({sim.clock_file.parent})"
            )
        for each in sim.teams:
            for service_job in each.service_jobs:
                if (each.name, service_job.name) not in hosts:
                    print(
                        f"  {each.name}/{service_job.name}: not served (path {service_job.path}: "
                        "the local services serve /jobs/close)"
                    )
            for app_engine_job in each.app_engine_jobs:
                print(
                    f"  {each.name}/{app_engine_job.name}: not served (App Engine: the demo has none locally)"
                )
        for (team, job), runs in sim.runs().items():
            if not runs:
                print(f"  {team}/{job}: no run scheduled in this window")
        try:
            planned = sum(trigger.miss is not MissedRun.NEVER_DELIVERED for trigger in sim.plan())
        except ValueError as exc:  # the planned misses do not fit the window
            print(f"cannot run the demo: {exc}", file=sys.stderr)
            return 2
        runner = threading.Thread(target=play, daemon=True)
        began = time.monotonic()
        runner.start()
        while runner.is_alive():
            runner.join(PROGRESS_SECONDS)
            print(_progress(sim, began, planned), flush=True)
        if not isinstance(outcome[0], BaseException):
            started_pids.extend(sim.pids())
            sim.stop()  # the scheduled jobs' instances are done: their cores go to the event jobs
            played = ", ".join(f"{team.name}/{job.name}" for team in valkey.teams for job in team.jobs)
            print(
                f"Valkey store: {played} on {valkey_url}, {valkey.span.total_seconds() / 60:g} min of "
                f"schedule at {valkey.rate:g}x ...",
                flush=True,
            )
            valkey_outcome.append(valkey.play_scheduled())
            started_pids.extend(valkey.pids())
            print(f"{len(events)} event jobs: starting the Pub/Sub emulator and instances ...", flush=True)
            pubsub.start()
            os.environ["PUBSUB_EMULATOR_HOST"] = pubsub.host
            event_outcome.append(_play_events(events, pubsub.host))
            for harness in events:
                started_pids.extend(harness.pids())
                harness.stop()
            print(
                f"proxied job: {PROXY_RUNS} runs of a Workflows target through functions/proxy ...",
                flush=True,
            )
            proxy.start()
            proxy_outcome.append(proxy.run())
            print(
                f"services: gunicorn (Flask, Django) and uvicorn (FastAPI), {SERVICE_RUNS} runs each, "
                "runonce from its wheel installed in a fresh venv ...",
                flush=True,
            )
            work = sim.log_dir / "services"
            service_harnesses.extend(
                ServiceHarness(service, PROJECT, emulator.host, work, SERVICE_RUNS, args.seed)
                for service in services(python)
            )
            try:
                service_outcome.append(play_services(service_harnesses))
            finally:
                for service in service_harnesses:
                    started_pids.extend(service.pids())
                    service.stop()
            print(
                "schedules: a job per overlap policy (allow, skip, wait) whose runs overlap on purpose, "
                "a missed run the watchdog catches up, an incremental job under faults, a job paused after "
                "failures and resumed, a job's excluded date ...",
                flush=True,
            )
            try:
                schedules_outcome.append(play_schedules(schedules))
            finally:
                started_pids.extend(schedules.pids())
                schedules.stop()
            _report(outcome[0], sim, args, schedules.lanes())
            _report_events(event_outcome[0], events)
            print()
            print(report_valkey(valkey_outcome[0], valkey_url, valkey.rate))
            print()
            print(proxy_outcome[0].render())
            print(f"logs: {proxy.log_dir}")
            print()
            print(render_services(service_outcome[0]))
            print(f"logs: {sim.log_dir / 'services'}")
            print()
            print(render_schedules(schedules_outcome[0]))
            print(f"logs: {schedules.log_dir}")
            watched.append(_watch(sim, outcome[0]))
    except KeyboardInterrupt:
        print("\ninterrupted: stopping everything", file=sys.stderr)
        stop_everything()
        return 130
    except EmulatorUnavailable as exc:
        print(f"cannot run the demo: {exc}", file=sys.stderr)
        return 2
    finally:
        stop_everything()
    alive = _leftovers(started_pids, [emulator, pubsub, valkey])
    if isinstance(outcome[0], BaseException):
        raise outcome[0]
    if alive:
        print(f"FAIL: processes still running after stop: {alive}", file=sys.stderr)
    events_ok = all(result.ok for result in event_outcome[0])
    watch_ok = bool(watched) and all(watched)
    services_ok = bool(service_outcome) and all(result.ok for result in service_outcome[0])
    schedules_ok = bool(schedules_outcome) and schedules_outcome[0].ok
    valkey_ok = bool(valkey_outcome) and valkey_outcome[0].ok
    passed = outcome[0].ok and events_ok and proxy_outcome[0].ok and services_ok and schedules_ok and watch_ok
    passed = passed and valkey_ok
    return 0 if passed and not alive else 1
