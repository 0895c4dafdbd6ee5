"""Overlap policies and catch-up in the stacks (docs/stacks/schedules.md): the overlap header on
every Scheduler job whose policy is not `allow`, on functions, Cloud Run services and App Engine
alike (the every-feature team has one job of each policy)."""

from __future__ import annotations

from pathlib import Path

import pytest

from runonce.contract import LOCATION_HEADER, OVERLAP_HEADER, PROJECT_HEADER
from stacks.team import Job, Overlap, Team, load_team_file
from tests.stacks.conftest import Synthesized, synthesize

EVERY_FEATURE = Path(__file__).parent / "fixtures" / "every_feature.py"


@pytest.fixture(scope="module")
def every(archive_dir) -> Synthesized:
    """The every-feature team, synthesized."""
    return synthesize(load_team_file(EVERY_FEATURE), archive_dir)


def scheduler_job(synth: Synthesized, job: str) -> dict:
    (config,) = [
        config
        for config in synth.resources("google_cloud_scheduler_job").values()
        if config["name"] == f"{synth.team.name}-{job}"
    ]
    return config


def sent_headers(synth: Synthesized, job: str) -> dict[str, str]:
    config = scheduler_job(synth, job)
    target = config.get("http_target") or config["app_engine_http_target"]
    return target["headers"]


@pytest.mark.parametrize(
    ("job", "policy"),
    [("settle", "skip"), ("compact", "wait")],
    ids=["service job skips", "app engine job waits"],
)
def test_a_job_whose_policy_is_not_allow_sends_it_on_every_delivery(every, job, policy):
    assert sent_headers(every, job) == {
        PROJECT_HEADER: every.team.project,
        LOCATION_HEADER: every.team.region,
        OVERLAP_HEADER: policy,
    }


def test_a_job_that_allows_overlap_sends_no_policy_header(every):
    allowing = [job.name for job in every.team.scheduled_views if job.overlap == Overlap.ALLOW]
    assert {"report", "close", "sweep"} <= set(allowing)
    for job in allowing:
        assert OVERLAP_HEADER not in sent_headers(every, job), job


@pytest.mark.parametrize("policy", [Overlap.SKIP, Overlap.WAIT, "skip"])
def test_a_function_jobs_policy_is_sent_as_its_value(archive_dir, policy):
    team = Team(
        name="lone",
        project="acme-lone-1",
        region="europe-west1",
        alerts=False,
        jobs=[Job(name="report", schedule="0 3 * * *", source="report", overlap=policy)],
    )
    assert sent_headers(synthesize(team, archive_dir), "report")[OVERLAP_HEADER] == Overlap(policy).value
