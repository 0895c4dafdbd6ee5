"""Overlap policies and catch-up in the stacks (docs/stacks/schedules.md): the overlap header on
every Scheduler job whose policy is not `allow`, on functions, Cloud Run services and App Engine
alike (the every-feature team has one job of each policy); validation of a policy or a catch-up
window the schedule cannot satisfy."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from runonce.contract import LOCATION_HEADER, OVERLAP_HEADER, PROJECT_HEADER
from stacks.config.problem import Problem
from stacks.team import AppEngineJob, Job, Overlap, Retry, Service, ServiceJob, Team, load_team_file
from stacks.validate import find_problems
from stacks.validate.windows import grace_seconds
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


# --- validation: a policy the schedule cannot satisfy is refused, with the fix ---

NIGHTLY = Job(name="nightly", schedule="0 3 * * *", source="report")
TEAM = Team(name="acme", project="acme-prod-1", region="europe-west1", jobs=[NIGHTLY], alerts=False)
# NIGHTLY's grace: retries 200, 420, 680, 1020 and 1520 s after the first attempt when each takes
# its 180 s deadline, the last ending at 1700 s, then a 360 s lease.
NIGHTLY_GRACE = 2060


def problems(team: Team = TEAM, **changes) -> list[Problem]:
    """Every problem of the team whose first job has these changes."""
    return find_problems([replace(team, jobs=[replace(team.jobs[0], **changes)])])


def fields(found: list[Problem]) -> list[tuple[str | None, str]]:
    return [(problem.job, problem.field) for problem in found]


def test_nightly_is_valid_with_every_policy_and_its_grace_is_the_one_the_tests_assume():
    assert grace_seconds(NIGHTLY) == NIGHTLY_GRACE
    for policy in Overlap:
        assert problems(overlap=policy) == []


def test_an_unknown_overlap_policy_is_refused_with_the_known_ones():
    (found,) = problems(overlap="skipp")
    assert (found.job, found.field) == ("nightly", "overlap")
    assert "Overlap.SKIP" in found.fix and "Overlap.WAIT" in found.fix


def test_a_wait_job_whose_retries_end_within_the_lease_is_refused_even_if_the_next_run_catches_up():
    # Every 10 minutes: the retries before the next run come 20, 60, 140 and 300 s after the first
    # attempt, all within the 360 s lease of the run before.
    often = {
        "schedule": "*/10 * * * *",
        "next_run_catches_up": True,
        "retries_may_skip_next_run": True,
    }
    assert problems(**often) == []
    (found,) = problems(overlap=Overlap.WAIT, **often)
    assert (found.job, found.field) == ("nightly", "overlap")
    assert "360 s" in found.message and "300 s" in found.message
    assert "Overlap.SKIP" in found.fix and "lower timeout_seconds" in found.fix


def test_a_wait_job_without_retries_is_refused_on_its_policy_not_twice():
    assert fields(problems(retry=Retry(retry_count=0))) == [("nightly", "retry")]
    (found,) = problems(overlap=Overlap.WAIT, retry=Retry(retry_count=0))
    assert (found.job, found.field) == ("nightly", "overlap")
    assert "no retry before its next run" in found.message
    assert "raise retry.retry_count" in found.fix


def test_a_wait_job_whose_lease_outlasts_its_schedule_can_only_be_fixed_by_the_timeout_or_the_schedule():
    (found,) = problems(
        overlap=Overlap.WAIT,
        schedule="*/5 * * * *",
        retry=Retry(retry_count=0),
        next_run_catches_up=True,
    )
    assert found.field == "overlap"
    assert found.fix.startswith(
        "lower timeout_seconds (the lease is timeout + 60 s) or schedule the job less often"
    )


def test_a_negative_catch_up_window_is_refused():
    assert fields(problems(catch_up_seconds=-1)) == [("nightly", "catch_up_seconds")]


def test_a_catch_up_window_longer_than_the_records_are_kept_is_refused():
    (found,) = problems(catch_up_seconds=3 * 86400, retention_seconds=2 * 86400)
    assert found.field == "catch_up_seconds"
    assert "retention_seconds (172800 s)" in found.message
    assert found.fix == "set catch_up_seconds <= 86400"


def test_a_catch_up_window_longer_than_the_watchdog_looks_back_is_refused():
    (found,) = problems(catch_up_seconds=2 * 86400)
    assert found.field == "catch_up_seconds"
    assert "looks back for this job (86400 s" in found.message
    assert found.fix == "set catch_up_seconds <= 86400"
    assert problems(catch_up_seconds=86400) == []


def test_a_catch_up_window_that_closes_before_a_run_can_be_judged_missed_is_refused():
    earliest = NIGHTLY_GRACE + 600
    (found,) = problems(catch_up_seconds=earliest)
    assert found.field == "catch_up_seconds"
    assert found.fix == f"set catch_up_seconds above {earliest} (at most 86400), or 0"
    assert problems(catch_up_seconds=earliest + 1) == []


def test_a_catch_up_window_on_a_team_without_a_watchdog_is_refused():
    (found,) = problems(replace(TEAM, watchdog=False), catch_up_seconds=6 * 3600)
    assert found.field == "catch_up_seconds"
    assert "watchdog=False" in found.message


def test_service_and_app_engine_jobs_policies_are_checked_on_their_scheduled_view():
    team = replace(
        TEAM,
        jobs=[],
        services=[Service(name="api")],
        service_jobs=[ServiceJob(name="close", schedule="0 7 * * *", service="api", catch_up_seconds=-5)],
        app_engine_jobs=[
            AppEngineJob(name="sweep", schedule="0 9 * * *", relative_uri="/s", overlap="pause")
        ],
    )
    assert fields(find_problems([team])) == [("close", "catch_up_seconds"), ("sweep", "overlap")]
