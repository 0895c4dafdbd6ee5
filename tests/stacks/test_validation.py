"""Synth-time validation: every problem is found, named (team, job, field) and comes with a fix."""

from __future__ import annotations

from dataclasses import replace

import pytest

from stacks.team import TEAMS_DIR, Job, Retry, Team, load_team_file, load_teams
from stacks.validation import (
    InvalidConfig,
    find_problems,
    retry_offsets_seconds,
    retry_window_seconds,
    validate,
)

GOOD_JOB = Job(
    name="nightly", schedule="0 3 * * *", source="report", timeout_seconds=300, attempt_deadline_seconds=180
)
GOOD_TEAM = Team(name="acme", project="acme-prod-1", region="europe-west1", jobs=[GOOD_JOB])


def problems_of_job(**changes) -> list[tuple[str | None, str]]:
    """(job, field) of every problem of a team whose only job has these changes."""
    team = replace(GOOD_TEAM, jobs=[replace(GOOD_JOB, **changes)])
    return [(problem.job, problem.field) for problem in find_problems([team])]


def problems_of_team(**changes) -> list[tuple[str | None, str]]:
    """(job, field) of every problem of the good team with these changes."""
    return [(problem.job, problem.field) for problem in find_problems([replace(GOOD_TEAM, **changes)])]


def test_the_shipped_teams_are_valid():
    validate(load_teams())


def test_the_template_is_valid_except_for_its_placeholders():
    problems = find_problems([load_team_file(TEAMS_DIR / "_template.py")])
    assert [(p.team, p.field) for p in problems] == [
        ("my-team", "name"),
        ("my-team", "project"),
        ("my-team", "labels"),
    ]
    assert all("placeholder" in p.message for p in problems)


def test_a_good_team_has_no_problem():
    assert find_problems([GOOD_TEAM]) == []


@pytest.mark.parametrize("schedule", ["every 5 minutes", "0 3 * *", "0 3 * * * *", "61 * * * *", "@daily"])
def test_schedule_must_be_unix_cron(schedule):
    assert problems_of_job(schedule=schedule) == [("nightly", "schedule")]


def test_schedule_message_explains_the_lost_schedule_time_header_and_the_fix():
    team = replace(GOOD_TEAM, jobs=[replace(GOOD_JOB, schedule="every 5 minutes")])
    (problem,) = find_problems([team])
    assert "X-CloudScheduler-ScheduleTime" in str(problem)
    assert '"*/5 * * * *"' in str(problem)
    assert str(problem).startswith("team 'acme', job 'nightly', field schedule:")


def test_time_zone_must_be_known():
    assert problems_of_job(time_zone="Mars/Olympus") == [("nightly", "time_zone")]


@pytest.mark.parametrize("deadline", [14, 1801])
def test_attempt_deadline_within_15_seconds_and_30_minutes(deadline):
    assert ("nightly", "attempt_deadline_seconds") in problems_of_job(
        attempt_deadline_seconds=deadline, timeout_seconds=3600
    )


@pytest.mark.parametrize(
    ("retry", "field"),
    [
        (Retry(retry_count=6), "retry.retry_count"),
        (Retry(retry_count=-1), "retry.retry_count"),
        (Retry(min_backoff_seconds=-1), "retry.min_backoff_seconds"),
        (Retry(max_backoff_seconds=3601), "retry.max_backoff_seconds"),
        (Retry(max_doublings=17), "retry.max_doublings"),
        (Retry(max_retry_duration_seconds=-5), "retry.max_retry_duration_seconds"),
        (Retry(min_backoff_seconds=400, max_backoff_seconds=300), "retry.min_backoff_seconds"),
    ],
)
def test_retry_values_within_scheduler_ranges(retry, field):
    assert problems_of_job(retry=retry, next_run_catches_up=True) == [("nightly", field)]


def test_function_timeout_at_most_the_http_maximum():
    assert problems_of_job(timeout_seconds=3601, next_run_catches_up=True) == [("nightly", "timeout_seconds")]


def test_attempt_deadline_not_longer_than_the_function_timeout():
    assert problems_of_job(timeout_seconds=60, attempt_deadline_seconds=120) == [
        ("nightly", "attempt_deadline_seconds")
    ]


def test_lease_must_outlast_the_function_timeout():
    assert problems_of_job(env={"RUNONCE_LEASE_SECONDS": "200"}) == [("nightly", "env")]


def test_a_longer_lease_may_be_set():
    assert problems_of_job(env={"RUNONCE_LEASE_SECONDS": "500"}) == []


def test_a_crashed_run_must_get_a_retry_after_its_lease_expires():
    # Retries 20, 60 and 140 s after the first attempt all meet the 360 s lease of a crashed attempt.
    team = replace(GOOD_TEAM, jobs=[replace(GOOD_JOB, retry=Retry(retry_count=3))])
    (problem,) = find_problems([team])
    assert (problem.job, problem.field) == ("nightly", "retry")
    assert "lease (360 s)" in problem.message and "last retry comes 140 s" in problem.message
    assert "next_run_catches_up=True" in problem.fix


def test_a_longer_lease_must_still_end_before_the_last_retry():
    assert problems_of_job(env={"RUNONCE_LEASE_SECONDS": "900"}) == [("nightly", "retry")]


def test_a_job_scheduled_more_often_than_its_lease_must_say_the_next_run_catches_up():
    # Every 5 minutes with a 360 s lease: no retry can come after the lease before the next run,
    # and the default retries reach that run; each opt-out lifts its own rule.
    assert problems_of_job(schedule="*/5 * * * *") == [("nightly", "retry"), ("nightly", "retry")]
    assert problems_of_job(schedule="*/5 * * * *", next_run_catches_up=True) == [("nightly", "retry")]
    assert (
        problems_of_job(schedule="*/5 * * * *", next_run_catches_up=True, retries_may_skip_next_run=True)
        == []
    )


def test_retries_follow_scheduler_backoff_and_stop_before_the_next_run():
    assert Retry().offsets_seconds(next_run_seconds=86400) == [20, 60, 140, 300, 620]
    assert Retry().offsets_seconds(next_run_seconds=300) == [20, 60, 140]
    assert Retry(retry_count=1, max_retry_duration_seconds=100).offsets_seconds(86400) == [20, 60]


@pytest.mark.parametrize("name", ["RUNONCE_DATABASE", "RUNONCE_COLLECTION", "RUNONCE_RETENTION_SECONDS"])
def test_stack_owned_variables_cannot_be_overridden(name):
    assert problems_of_job(env={name: "x"}) == [("nightly", "env")]


def test_env_names_must_be_valid():
    assert problems_of_job(env={"1BAD-NAME": "x"}) == [("nightly", "env")]


def test_retention_must_outlast_the_retry_window():
    job = replace(GOOD_JOB, retry=Retry(retry_count=5, min_backoff_seconds=600, max_backoff_seconds=3600))
    window = retry_window_seconds(job)
    assert problems_of_job(retry=job.retry, retention_seconds=window - 1) == [
        ("nightly", "retention_seconds")
    ]
    assert problems_of_job(retry=job.retry, retention_seconds=window) == []


def test_retry_window_follows_scheduler_backoff():
    # 10 s doubled three times, then linear (80 s steps), capped at 300 s: 10+20+40+80+160 = 310 s of
    # waiting plus six attempts of 60 s.
    job = replace(
        GOOD_JOB,
        attempt_deadline_seconds=60,
        retry=Retry(retry_count=5, min_backoff_seconds=10, max_backoff_seconds=300, max_doublings=3),
    )
    assert retry_window_seconds(job) == 310 + 6 * 60


def test_scheduler_retries_until_both_retry_count_and_max_retry_duration_are_used_up():
    # API reference: with both set, retries continue until both limits are reached. Five retries
    # of 180 s attempts outlast 100 s; a 3000 s duration outlasts five retries.
    five = retry_window_seconds(replace(GOOD_JOB, retry=Retry(retry_count=5)))
    assert (
        retry_window_seconds(replace(GOOD_JOB, retry=Retry(retry_count=5, max_retry_duration_seconds=100)))
        == five
    )
    longer = replace(GOOD_JOB, retry=Retry(retry_count=5, max_retry_duration_seconds=3000))
    assert retry_window_seconds(longer) > five
    assert retry_offsets_seconds(longer.retry, 180)[-1] < 3000


@pytest.mark.parametrize("name", ["Nightly", "nightly_job", "-nightly", "nightly-", "9lives", "x" * 41])
def test_job_names_must_be_valid(name):
    assert (name, "name") in problems_of_job(name=name)


def test_function_name_must_fit_cloud_run():
    team = replace(GOOD_TEAM, name="a" * 20, jobs=[replace(GOOD_JOB, name="b" * 40)])
    problems = [(p.job, p.field, "Cloud Run" in p.message) for p in find_problems([team])]
    assert problems == [("b" * 40, "name", True)]


@pytest.mark.parametrize(
    ("changes", "field"),
    [
        ({"name": "Acme"}, "name"),
        ({"name": "a" * 21}, "name"),
        ({"project": "Acme Prod"}, "project"),
        ({"region": "Europe West"}, "region"),
        ({"database": "(default)"}, "database"),
        ({"database": "ab"}, "database"),
        ({"collection": "runs/nested"}, "collection"),
        ({"labels": {"Owner": "x"}}, "labels"),
        ({"labels": {"owner": "Mixed Case"}}, "labels"),
        ({"jobs": []}, "jobs"),
    ],
)
def test_team_fields_must_be_valid(changes, field):
    assert problems_of_team(**changes) == [(None, field)]


def test_memory_and_instances_must_be_valid():
    assert problems_of_job(memory="1GB") == [("nightly", "memory")]
    assert problems_of_job(min_instances=4, max_instances=3) == [("nightly", "min_instances")]


def test_source_folder_must_exist_with_the_entry_point():
    assert problems_of_job(source="no-such-folder") == [("nightly", "source")]
    assert problems_of_job(entry_point="missing") == [("nightly", "entry_point")]


def test_job_labels_must_be_valid():
    assert problems_of_job(labels={"team": "A B"}) == [("nightly", "labels")]


def test_duplicate_job_names_are_reported():
    team = replace(GOOD_TEAM, jobs=[GOOD_JOB, GOOD_JOB])
    assert [(p.job, p.field) for p in find_problems([team])] == [("nightly", "name")]


def test_two_teams_may_not_share_a_name_or_a_database_in_one_project():
    other = replace(GOOD_TEAM, name="beta")
    assert [(p.team, p.field) for p in find_problems([GOOD_TEAM, other])] == [("beta", "database")]
    assert [(p.team, p.field) for p in find_problems([GOOD_TEAM, GOOD_TEAM])][:1] == [("acme", "name")]
    assert find_problems([GOOD_TEAM, replace(other, database="beta-runonce")]) == []


def test_all_problems_are_reported_together_once():
    bad = replace(GOOD_JOB, schedule="every 5 minutes", time_zone="Nowhere", timeout_seconds=4000)
    team = replace(GOOD_TEAM, region="nowhere", jobs=[bad, replace(bad, name="second")])
    with pytest.raises(InvalidConfig) as raised:
        validate([team])
    report = str(raised.value)
    assert len(raised.value.problems) == 7
    assert report.startswith("7 problem(s) in the team config:")
    assert all(f"field {field}" in report for field in ("region", "schedule", "time_zone", "timeout_seconds"))
    assert all(" Fix: " in line for line in report.splitlines()[1:])
