"""The demo's services (localscheduler.demos.services) at a small size: gunicorn serving the Flask and
Django apps and uvicorn serving the FastAPI app, on real server processes and the Firestore
emulator, each run delivered with one fault (every fault played on every service). Each service's
verdict is ok, and the verdict counts effects from the outbox itself: a second effect of a run,
written there under another document id, turns it to FAIL."""

from __future__ import annotations

from pathlib import Path

import pytest
from google.cloud import firestore

from localscheduler.demos.services import FAULTS, ServiceHarness, play_services, render
from localscheduler.hosts.apps.job import RUN_KEY_FIELD
from localscheduler.hosts.service import services
from stacks.team import REPO_ROOT

PROJECT = "runonce-local"


@pytest.fixture(scope="module")
def played(firestore_emulator, tmp_path_factory, installed_runonce):
    log_dir = tmp_path_factory.mktemp("services")
    harnesses = [
        ServiceHarness(service, PROJECT, firestore_emulator.host, log_dir, len(FAULTS), 7)
        for service in services(installed_runonce)
    ]
    try:
        results = play_services(harnesses)
    finally:
        for harness in harnesses:
            harness.stop()
    assert not [pid for harness in harnesses for pid in harness.pids()], "an instance is still running"
    return harnesses, results


def test_each_service_plays_every_fault_and_its_verdict_is_ok(played):
    _, results = played
    assert [result.service for result in results] == ["gunicorn-flask", "gunicorn-django", "uvicorn-fastapi"]
    table = render(results)
    for result in results:
        assert {run.fault for run in result.runs} == set(FAULTS)
        assert [run.effects for run in result.runs] == [1] * len(FAULTS), table
        assert result.ok, table
        assert result.row().endswith(" ok"), table


def test_the_kills_killed_the_servers_and_the_retries_took_over(played):
    _, results = played
    for result in results:
        assert result.restarts >= 2, render(results)  # instance_killed and killed_after_effect
        for run in result.runs:
            if run.fault in ("instance_killed", "killed_after_effect", "short_deadline"):
                assert run.answers[0].status is None and run.answers[-1].ok, (run.fault, run.answers)
            if run.fault in ("duplicate_delivery", "lost_response"):
                assert len(run.answers) >= 2 and run.answers[-1].ok, (run.fault, run.answers)


def test_a_second_effect_of_a_run_fails_the_verdict(played):
    harnesses, _ = played
    harness = harnesses[2]
    victim = harness.played[0]
    client = firestore.Client(project=PROJECT)
    client.collection(harness.service.outbox).document(victim.key + "-again").create(
        {RUN_KEY_FIELD: victim.key}
    )
    try:
        result = harness.judge()
        assert not result.ok
        assert any("had 2 effects" in problem for problem in result.problems), result.problems
        assert result.row().endswith("FAIL")
        assert "FAIL" in render([result])
    finally:
        client.collection(harness.service.outbox).document(victim.key + "-again").delete()
    assert harness.judge().ok


def test_the_services_import_runonce_from_the_installed_wheel(played, installed_runonce):
    _, results = played
    for result in results:
        assert result.imported_from, result.service
        for where in result.imported_from:
            assert Path(where).is_relative_to(installed_runonce.parents[1]), (result.service, where)
            assert not Path(where).is_relative_to(REPO_ROOT / "functions"), (result.service, where)
