"""The team files' service jobs in the simulation `make demo` plays: a `ServiceJob` on a service the
stack deploys runs on the example service (examples/service/main.py on uvicorn, as its Dockerfile
serves it), one on an existing service on the Flask app on gunicorn, both importing runonce from
its installed wheel; the local Scheduler delivers them with the same faults as the function jobs,
and the verdict judges them as it judges any job, a row each.

One short simulation (12 minutes of schedule at 40x, every fault on each job: seed 83); the
verdict is recomputed after a defect is injected: a second effect of a run, and a run of the plan
that was never played, each turn it to FAIL.
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from google.cloud import firestore

from localscheduler.demos.simulation import Result, Simulation
from localscheduler.hosts.apps.job import RUN_KEY_FIELD, RUNONCE_FIELD
from localscheduler.hosts.service import APPS, TeamServices
from localscheduler.scheduler.cloud_scheduler import Trigger
from localscheduler.scheduler.faults import Fault, FaultMix
from localscheduler.scheduler.plan import PlannedRun
from localscheduler.verdicts.scheduled import render
from stacks.team import REPO_ROOT, TEAMS_DIR, Service, ServiceJob, Team, load_teams
from tests.conftest import PROJECT
from tests.local.chaos import FAST_RETRY

START = datetime(2026, 3, 29, 1, 0, tzinfo=UTC)
SPAN = timedelta(minutes=12)
MIX = FaultMix(
    seed=83,
    duplicate_delivery=0.1,
    lost_response=0.1,
    short_deadline=0.1,
    instance_killed=0.12,
    retryable_failure=0.1,
    permanent_failure=0.08,
    killed_after_effect=0.12,
)


def _job(name: str, service: str, path: str = "/jobs/close") -> ServiceJob:
    return ServiceJob(
        name=name,
        schedule="* * * * *",
        service=service,
        path=path,
        attempt_deadline_seconds=15,
        retry=FAST_RETRY,
    )


TEAM = Team(
    name="svc",
    project="runonce-svc",
    region="europe-west1",
    jobs=[],
    services=[
        Service(
            name="closer", image="europe-west1-docker.pkg.dev/runonce-svc/jobs/closer:1", timeout_seconds=30
        ),
        Service(name="billing-api", timeout_seconds=30),
    ],
    service_jobs=[
        _job("books-close", "closer"),
        _job("billing-close", "billing-api"),
        _job("reopen", "closer", "/jobs/reopen"),
    ],
)
PLAYED = ("books-close", "billing-close")


@pytest.fixture(scope="module")
def played(firestore_emulator, tmp_path_factory, installed_runonce) -> tuple[Simulation, Result]:
    sim = Simulation(
        [TEAM],
        START,
        SPAN,
        40.0,
        MIX,
        tmp_path_factory.mktemp("team-services"),
        PROJECT,
        firestore_emulator.host,
        instances_per_job=3,
        team_services=TeamServices(installed_runonce),
    )
    try:
        sim.start_instances()
        result = sim.run()
    finally:
        sim.stop()
    assert not sim.pids(), "an instance is still running"
    print()
    print(render(result.rows))
    return sim, result


def _verdicts(result: Result, job: str) -> list:
    return [v for v in result.verdicts if v.trigger.run.job.name == job]


@pytest.mark.fast
def test_the_demo_plays_every_service_job_of_the_example_team_file_on_its_services_stand_in():
    sim = Simulation(
        load_teams(TEAMS_DIR), START, timedelta(hours=2), 120.0, FaultMix(), Path("unused"), PROJECT, "unused"
    )
    assert [service for _, _, service in sim.served() if service] == []  # without team_services
    served = dataclasses.replace(sim, team_services=TeamServices())
    [example] = [team for team in served.teams if team.name == "example"]
    hosts = {job.name: service for team, job, service in served.served() if team is example and service}
    assert {name: hosts[name].source for name in ("books-close", "billing-close")} == {
        "books-close": APPS / "example_service.py",  # closer has an image: examples/service
        "billing-close": APPS / "flask_app.py",  # billing-api exists already
    }
    views = {job.name: job for team, job, _ in served.served() if team is example}
    assert (views["books-close"].max_instances, views["billing-close"].max_instances) == (2, 3)
    runs = served.runs()
    assert len(runs[("example", "books-close")]) == 8 and len(runs[("example", "billing-close")]) == 6
    assert ("example", "sweep") not in runs  # an App Engine job: there is no local App Engine


def test_each_service_job_gets_a_row_and_every_run_took_effect_once(played):
    _, result = played
    rows = {row.job: row for row in result.rows}
    assert set(rows) == set(PLAYED), render(result.rows)
    for job in PLAYED:
        verdicts = _verdicts(result, job)
        assert len(verdicts) == 12
        assert [v.problems for v in verdicts] == [()] * 12, render(result.rows)
        assert all(v.effects == (1 if v.status == "completed" else 0) for v in verdicts)
        assert rows[job].verdict == "ok" and rows[job].effects + rows[job].permanent_failures == 12
    assert result.ok


def test_a_service_job_on_a_path_no_local_service_serves_is_not_played(played):
    sim, result = played
    assert ("svc", "reopen") not in sim.pools
    assert not _verdicts(result, "reopen")


def test_the_local_scheduler_played_every_fault_on_each_service_job(played):
    _, result = played
    for job in PLAYED:
        sent = [s for s in result.journal.sent() if s.job == job]
        injected = Counter(s.fault for s in sent if s.attempt == 1 and not s.copy)
        assert {f.value for f in Fault if f is not Fault.NONE} <= set(injected), (job, injected)
        assert any(s.killed for s in sent), f"no instance of {job} was killed"
        assert sum(v.bodies > 1 for v in _verdicts(result, job)) >= 2, f"no run of {job} ran its body again"


def test_the_service_jobs_run_runonce_from_the_installed_wheel(played, installed_runonce):
    sim, _ = played
    for job in PLAYED:
        assert sim.pools[("svc", job)].host.python == installed_runonce
    # The Flask app records where it imported runonce from in each effect.
    outbox = sim.team_services.local(TEAM, TEAM.services[1]).outbox
    imported = {
        d.to_dict()[RUNONCE_FIELD] for d in firestore.Client(project=PROJECT).collection(outbox).stream()
    }
    assert imported and all(Path(where).is_relative_to(installed_runonce.parents[1]) for where in imported)
    assert not any(Path(where).is_relative_to(REPO_ROOT / "functions") for where in imported)


def test_a_second_effect_of_a_service_job_run_fails_the_verdict(played):
    sim, result = played
    [victim, *_] = [v for v in _verdicts(result, "books-close") if v.status == "completed"]
    outbox = firestore.Client(project=PROJECT).collection(
        sim.team_services.local(TEAM, TEAM.services[0]).outbox
    )
    second = outbox.document(victim.trigger.key + "-again")
    second.create({RUN_KEY_FIELD: victim.trigger.key})
    try:
        again = sim.judged(result.plan, result.journal)
    finally:
        second.delete()
    [judged] = [v for v in again.verdicts if v.trigger.key == victim.trigger.key]
    assert "executed 2 times" in judged.problems
    assert not again.ok
    assert {row.job: row.verdict for row in again.rows}["books-close"] == "FAIL (1 runs)"
    assert sim.judged(result.plan, result.journal).ok


def test_a_service_job_run_that_was_never_played_fails_the_verdict(played):
    sim, result = played
    last = _verdicts(result, "billing-close")[-1].trigger.run
    later = last.next_time
    unplayed = Trigger(PlannedRun(TEAM, last.job, later, later + timedelta(minutes=1)), False, later, later)
    again = sim.judged([*result.plan, unplayed], result.journal)
    [judged] = [v for v in again.verdicts if v.trigger is unplayed]
    assert judged.problems == ("never ran: no ledger record",)
    assert not again.ok
    assert {row.job: row.verdict for row in again.rows}["billing-close"] == "FAIL (1 runs)"
