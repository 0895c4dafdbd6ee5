"""The local scheduler judges any job the same way: a job from another folder, which logs nothing
of its own and keeps its effects in a collection of its own, is judged from the ledger, the body
lines the runonce core writes and the effects its folder declares; a job whose folder declares no
effects is judged on the ledger and its bodies, and the table says its effects were not observed;
a job with a Google API `target` runs the proxy against the stand-in, whose starts are its effects.

One short simulation (8 minutes of schedule at 40x) with the faults that need nothing from the
job: duplicate deliveries, lost answers, and instances killed while they hold a run.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from localscheduler.demos.simulation import Result, Simulation
from localscheduler.scheduler.faults import FaultMix
from localscheduler.verdicts.scheduled import guarantee_summary
from stacks.targets import Workflow
from stacks.team import Job, Retry, Team
from tests.local.played import play

MAILER = """
import json
import time

import functions_framework
from google.api_core.exceptions import AlreadyExists
from google.cloud import firestore

from runonce import current_run, deduplicated


@functions_framework.http
@deduplicated
def send(request):
    run = current_run()
    # As long as the local Scheduler says the attempt works (its `work_seconds` knob), so that an
    # instance it kills holding the run dies mid-body on a loaded machine too, not after the body.
    time.sleep(float(json.loads(request.get_data(as_text=True) or "{}").get("work_seconds", 0)))
    try:
        firestore.Client().collection("sent_mail").document(run.key).create(
            {"for_run": run.key, "by_attempt": run.attempt_id}
        )
    except AlreadyExists:
        pass
    return "sent"
"""
MAILER_EFFECTS = (
    '[effects]\ncollection = "sent_mail"\nrun_key_field = "for_run"\nattempt_id_field = "by_attempt"\n'
)
QUIET = """
import functions_framework

from runonce import deduplicated


@functions_framework.http
@deduplicated
def handle(request):
    return "done"
"""
RETRY = Retry(retry_count=5, min_backoff_seconds=1, max_backoff_seconds=10, max_doublings=3)


WORKFLOW = "projects/runonce-others/locations/europe-west1/workflows/nightly-etl"


def _job(name: str, source=None, entry_point: str = "handle", target=None) -> Job:
    return Job(
        name=name,
        schedule="* * * * *",
        source=str(source) if source else "",
        target=target,
        entry_point=entry_point,
        timeout_seconds=30,
        attempt_deadline_seconds=15,
        retry=RETRY,
    )


@pytest.fixture(scope="module")
def others(firestore_emulator, tmp_path_factory) -> Result:
    mailer = tmp_path_factory.mktemp("mailer")
    (mailer / "main.py").write_text(MAILER)
    (mailer / "local_demo.toml").write_text(MAILER_EFFECTS)
    quiet = tmp_path_factory.mktemp("quiet")
    (quiet / "main.py").write_text(QUIET)
    team = Team(
        name="others",
        project="runonce-others",
        region="europe-west1",
        jobs=[
            _job("mailer", mailer, "send"),
            _job("quiet", quiet),
            _job("etl", target=Workflow(WORKFLOW, {"table": "orders"})),
        ],
    )
    mix = FaultMix(seed=11, duplicate_delivery=0.2, lost_response=0.2, instance_killed=0.2)
    sim = Simulation(
        [team],
        datetime(2026, 3, 29, 1, 0, tzinfo=UTC),
        timedelta(minutes=8),
        40.0,
        mix,
        tmp_path_factory.mktemp("others-logs"),
        "runonce-local",
        firestore_emulator.host,
        instances_per_job=2,
    )
    return play(sim)


def _verdicts(result: Result, job: str) -> list:
    return [v for v in result.verdicts if v.trigger.run.job.name == job]


def test_a_job_from_another_folder_is_judged_by_its_own_declared_effects(others):
    mailer = _verdicts(others, "mailer")
    assert len(mailer) >= 8
    assert [(v.problems, v.status, v.effects) for v in mailer] == [((), "completed", 1)] * len(mailer)


def test_its_bodies_are_read_from_the_core_s_lines_though_the_job_logs_nothing(others):
    mailer = _verdicts(others, "mailer")
    assert all(v.bodies >= 1 for v in mailer)
    killed = {s.schedule_time for s in others.journal.sent() if s.job == "mailer" and s.killed}
    assert killed, "no instance was killed holding a mailer run"
    assert all(v.ok for v in mailer if v.trigger.run.schedule_time in killed)


def test_a_job_that_declares_no_effects_is_judged_on_the_ledger_and_its_bodies(others):
    quiet = _verdicts(others, "quiet")
    assert quiet and all(v.ok and v.effects is None and v.status == "completed" for v in quiet)
    [row] = [row for row in others.rows if row.job == "quiet"]
    assert row.unobserved == len(quiet)
    assert "effects not observed for others/quiet" in guarantee_summary(others.verdicts)[-1]


def test_a_job_with_a_target_is_judged_by_what_the_stand_in_started(others):
    etl = _verdicts(others, "etl")
    assert len(etl) >= 8
    assert [(v.problems, v.status, v.effects) for v in etl] == [((), "completed", 1)] * len(etl)
    [row] = [row for row in others.rows if row.job == "etl"]
    assert (row.effects, row.unobserved) == (len(etl), 0)
