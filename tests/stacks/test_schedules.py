"""Overlap policies and catch-up in the stacks (docs/stacks/schedules.md): the overlap header on
every Scheduler job whose policy is not `allow`, on functions, Cloud Run services and App Engine
alike (the every-feature team has one job of each policy); validation of a policy or a catch-up
window the schedule cannot satisfy; the watchdog's catch-up windows and the grants a catch-up needs."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from runonce.contract import LOCATION_HEADER, OVERLAP_HEADER, PROJECT_HEADER, WATCHDOG_JOBS_VARIABLE
from stacks.config.problem import Problem
from stacks.team import (
    TEAMS_DIR,
    AppEngineJob,
    Job,
    Overlap,
    Retry,
    Service,
    ServiceJob,
    Team,
    load_team_file,
)
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


def test_a_catch_up_of_a_job_run_every_minute_is_refused_as_no_forced_run_can_carry_it():
    every_minute = {"next_run_catches_up": True, "retries_may_skip_next_run": True}
    assert problems(schedule="* * * * *", **every_minute) == []
    (found,) = problems(schedule="* * * * *", catch_up_seconds=6 * 3600, **every_minute)
    assert found.field == "catch_up_seconds"
    assert "more than 60 s ahead" in found.message
    assert problems(schedule="*/2 * * * *", catch_up_seconds=6 * 3600, **every_minute) == []


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
        app_engine_location="europe-west",
    )
    assert fields(find_problems([team])) == [("close", "catch_up_seconds"), ("sweep", "overlap")]


# --- the watchdog: each job's catch-up window, and the grants a catch-up needs, only then ---


def watchdog_env(synth: Synthesized) -> dict[str, str]:
    (config,) = [
        config
        for config in synth.resources("google_cloudfunctions2_function").values()
        if config["name"] == f"{synth.team.name}-watchdog"
    ]
    return config["service_config"]["environment_variables"]


def watchdog_grants(synth: Synthesized) -> list[tuple[str, str, str | None]]:
    """(type, role, condition expression) of every grant to the watchdog's account."""
    (account,) = [
        name
        for name, config in synth.resources("google_service_account").items()
        if config["account_id"] == f"{synth.team.name}-watchdog-run"
    ]
    member = f"serviceAccount:${{google_service_account.{account}.email}}"
    return sorted(
        (kind, config["role"], config.get("condition", {}).get("expression"))
        for kind in synth.document["resource"]
        if kind.endswith("_iam_member")
        for config in synth.resources(kind).values()
        if config["member"] == member
    )


def test_the_watchdogs_jobs_carry_each_jobs_catch_up_window(every, example):
    for synth in (every, example):
        watched = json.loads(watchdog_env(synth)[WATCHDOG_JOBS_VARIABLE])
        assert {job["job"]: job["catch_up_seconds"] for job in watched} == {
            job.name: job.catch_up_seconds for job in synth.team.scheduled_views
        }
    assert {
        job["job"]
        for job in json.loads(watchdog_env(every)[WATCHDOG_JOBS_VARIABLE])
        if job["catch_up_seconds"]
    } == {"report"}


def test_a_watchdog_that_catches_up_may_also_write_the_ledger_and_run_scheduler_jobs(every):
    ledger = f'resource.name == "projects/{every.team.project}/databases/runonce"'
    own = f'resource.name == "projects/{every.team.project}/databases/runonce-watchdog"'
    assert watchdog_grants(every) == [
        ("google_project_iam_member", "roles/cloudscheduler.jobRunner", None),
        ("google_project_iam_member", "roles/datastore.user", ledger),
        ("google_project_iam_member", "roles/datastore.user", own),
        ("google_project_iam_member", "roles/datastore.viewer", ledger),
    ]


def test_a_watchdog_without_catch_up_gets_neither_grant(example):
    assert all(job.catch_up_seconds == 0 for job in example.team.scheduled_views)
    assert {role for _, role, _ in watchdog_grants(example)} == {
        "roles/datastore.user",
        "roles/datastore.viewer",
    }
    assert [
        condition for _, role, condition in watchdog_grants(example) if role == "roles/datastore.user"
    ] == ['resource.name == "projects/runonce-example/databases/runonce-watchdog"']


def test_the_stacks_iam_wait_waits_for_the_catch_up_grants_and_again_once_catch_up_is_turned_on(
    every, example
):
    settled = every.resources("time_sleep")["iam-settled"]
    waited = {address.rsplit("_", 1)[0] for address in settled["depends_on"]}
    assert {
        "google_project_iam_member.watchdog_ledger-writer",
        "google_project_iam_member.watchdog_job-runner",
    } <= waited
    assert settled["triggers"]["catch_up"] == "watchdog"
    assert "catch_up" not in example.resources("time_sleep")["iam-settled"]["triggers"]


def test_a_team_that_catches_up_is_alerted_when_a_catch_up_cannot_start_its_run(every):
    (policy,) = [
        config
        for config in every.resources("google_monitoring_alert_policy").values()
        if config["display_name"] == "runonce every: a catch-up did not run a missed run"
    ]
    assert policy["severity"] == "ERROR"
    (condition,) = policy["conditions"]
    assert condition["condition_matched_log"]["label_extractors"] == {
        "job": "EXTRACT(jsonPayload.job)",
        "catch_up": "EXTRACT(jsonPayload.catch_up)",
    }
    assert policy["alert_strategy"]["notification_rate_limit"] == {"period": "300s"}
    assert "runonce backfill --team every --job JOB" in policy["documentation"]["content"]


def test_the_templates_overlap_and_catch_up_options_are_valid_once_uncommented(tmp_path):
    template = (TEAMS_DIR / "_template.py").read_text()
    options = ("# overlap=", "# catch_up_seconds=")
    lines = [
        line.replace("# ", "", 1) if line.strip().startswith(options) else line
        for line in template.splitlines()
    ]
    assert sum(line.strip().startswith(options) for line in template.splitlines()) == 2
    text = "\n".join(lines).replace(
        "from stacks.team import Job, Retry, Team", "from stacks.team import Job, Overlap, Retry, Team"
    )
    path = tmp_path / "uncommented.py"
    path.write_text(text)
    team = load_team_file(path)
    (job,) = team.jobs
    assert (job.overlap, job.catch_up_seconds) == (Overlap.SKIP, 6 * 3600)
    assert {problem.field for problem in find_problems([team])} == {"name", "project", "labels"}
