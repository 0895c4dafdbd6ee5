"""The chaos suite on the service hosts: gunicorn serving the Flask and Django apps, uvicorn serving
the FastAPI app (`async def` job), each from localscheduler/hosts/apps and importing runonce from
the installed wheel, driven by the local Cloud Scheduler on its accelerated clock with every fault
type mixed in (duplicates, lost answers, short deadlines, retryable and permanent failures,
forced runs, instances killed mid-run and right after the effect), on the Firestore emulator.

The properties are tests/local/chaos.py's, the ones tests/local/test_chaos.py asserts on
functions-framework: at most one attempt holds a run at a time, a body starts again only after an
attempt died or failed retryably, a keyed effect exactly once, and without the key the kill after
the effect gives a run two effects. A shorter schedule than the functions-framework suite's (SPAN
of its three jobs: 13 scheduled and 3 forced runs), with a higher share of faults (SEED gives
every type, four kills after the effect, two mid-run). Per host, one simulation of the keyed jobs and one of
the unkeyed job play side by side, once for the module; the hosts play one after another (side
by side, three hosts' instances on two cores answered too late for the accelerated clock). Each
test asserts one property per host; the same SEED replays the same faults on every host.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from localscheduler.demos.simulation import Result, Simulation
from localscheduler.hosts.apps.job import UNKEYED_VARIABLE
from localscheduler.hosts.service import Service, services
from localscheduler.scheduler.faults import FaultMix
from localscheduler.side_by_side import side_by_side
from stacks.team import Team
from tests.conftest import PROJECT
from tests.local.chaos import ChaosProperties, chaos_job, chaos_jobs, ledger_records, show

HOSTS = ("gunicorn-flask", "gunicorn-django", "uvicorn-fastapi")
SEED = 20286585
RATE = 40.0
SPAN = timedelta(minutes=7)
# Ten seconds before the first runs; the span crosses Europe/Berlin's switch to summer time (01:00).
START = datetime(2026, 3, 29, 0, 55, 50, tzinfo=UTC)
# Three instances per job, as on functions-framework: a killed server takes up to about 200 s of
# schedule to come back at 40x on a loaded machine, and the others serve the retries meanwhile;
# SEED kills no job three times within four minutes.
INSTANCES = 3
MIX = FaultMix(
    seed=SEED,
    duplicate_delivery=0.1,
    lost_response=0.1,
    short_deadline=0.1,
    instance_killed=0.1,
    retryable_failure=0.1,
    permanent_failure=0.08,
    killed_after_effect=0.2,
    forced_run=0.3,
)
UNKEYED_SPAN = timedelta(minutes=7)
UNKEYED_MIX = FaultMix(seed=SEED, killed_after_effect=0.4)


def _teams(host: str) -> tuple[Team, Team]:
    """The host's keyed team (three jobs) and its unkeyed one: projects of its own, so its runs
    are its own; the same team and job names on every host, so the same faults."""
    keyed = Team(
        name="chaos",
        project=f"runonce-chaos-{host}",
        region="europe-west1",
        jobs=chaos_jobs(),
    )
    unkeyed = Team(
        name="unkeyed",
        project=f"runonce-unkeyed-{host}",
        region="europe-west1",
        jobs=[chaos_job("unkeyed", "* * * * *", "Etc/UTC", **{UNKEYED_VARIABLE: "1"})],
    )
    return keyed, unkeyed


def _simulation(
    team: Team, span: timedelta, mix: FaultMix, service: Service, log_dir: Path, emulator: str
) -> Simulation:
    return Simulation(
        [team],
        START,
        span,
        RATE,
        mix,
        log_dir,
        PROJECT,
        emulator,
        instances_per_job=INSTANCES,
        service=service,
    )


def _play(simulations: list[Simulation]) -> list[Result]:
    """Start every simulation's instances, then play them side by side; stop them all."""
    try:
        for simulation in simulations:
            simulation.start_instances()
        return side_by_side([simulation.run for simulation in simulations])
    finally:
        for simulation in simulations:
            simulation.stop()


@pytest.fixture(scope="module", params=HOSTS)
def host(request) -> str:
    return request.param


@pytest.fixture(scope="module")
def simulated(host, firestore_emulator, tmp_path_factory, installed_runonce):
    """The host's keyed and unkeyed simulations, played side by side."""
    [service] = [service for service in services(installed_runonce) if service.name == host]
    keyed, unkeyed = _teams(host)
    log_dir = tmp_path_factory.mktemp(f"chaos-{host}")
    emulator = firestore_emulator.host
    keyed_result, unkeyed_result = _play(
        [
            _simulation(keyed, SPAN, MIX, service, log_dir / "keyed", emulator),
            _simulation(unkeyed, UNKEYED_SPAN, UNKEYED_MIX, service, log_dir / "unkeyed", emulator),
        ]
    )
    records = ledger_records([keyed])
    print(f"\n{host}:", end="")
    show(keyed_result, records)
    return (keyed_result, records), unkeyed_result


@pytest.fixture(scope="module")
def chaos(simulated):
    """The host's keyed simulation and its ledger records."""
    return simulated[0]


@pytest.fixture(scope="module")
def unkeyed(simulated) -> Result:
    """The host's simulation of a job whose effect is not keyed by the run key."""
    return simulated[1]


def test_each_host_plays_at_least_12_scheduled_runs(chaos):
    result, _ = chaos
    assert sum(not trigger.forced for trigger in result.plan) >= 12


class TestOnEachServiceHost(ChaosProperties):
    """The chaos properties on each host: the same tests as on functions-framework."""
