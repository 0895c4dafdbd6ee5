"""The first apply on a fresh project, for every feature: the team in
tests/stacks/fixtures/every_feature.py (GCS state, a job of each target kind, a push event job, an
Eventarc job on a bucket and one on a topic, the migration's kept accounts), its synthesized JSON
read against the provider's examples and Google's pages (docs/stacks.md, "First deploy"), and the
validation rules that keep its retries and event ages inside what Pub/Sub and Eventarc keep."""

from __future__ import annotations

from dataclasses import replace

import pytest

from stacks.team import EventJob, PushRetry, Team
from stacks.validation import find_problems

PUSH_JOB = EventJob(name="orders", source="orders_events", timeout_seconds=60)
TEAM = Team(name="acme", project="acme-prod-1", region="europe-west1", jobs=[], event_jobs=[PUSH_JOB])


def problems(**changes) -> list:
    return find_problems([replace(TEAM, event_jobs=[replace(PUSH_JOB, **changes)])])


def test_push_attempts_that_all_come_within_a_crashed_attempts_lease_are_refused():
    # Lease 120 s; 5 attempts 10 s apart end 40 s after the first: all meet the held claim.
    (problem,) = problems(max_delivery_attempts=5)
    assert (problem.job, problem.field) == ("orders", "max_delivery_attempts")
    assert "409" in problem.message and "40 s after the first" in problem.message
    assert "raise max_delivery_attempts to 14" in problem.fix
    assert "raise retry.min_backoff_seconds to 31" in problem.fix


def test_the_suggested_fixes_reach_past_the_lease():
    assert problems(max_delivery_attempts=14) == []
    assert problems(max_delivery_attempts=5, retry=PushRetry(min_backoff_seconds=31)) == []


def test_a_zero_minimum_backoff_never_reaches_past_the_lease():
    (problem,) = problems(retry=PushRetry(min_backoff_seconds=0))
    assert problem.field == "max_delivery_attempts" and "max_delivery_attempts to" not in problem.fix


def test_the_push_defaults_reach_past_the_default_lease():
    job = EventJob(name="orders", source="orders_events")
    offsets = job.retry.attempt_offsets_seconds(job.max_delivery_attempts)
    assert offsets[-1] > job.lease_seconds
    assert find_problems([replace(TEAM, event_jobs=[job])]) == []


def test_the_backoff_model_takes_every_wait_as_the_minimum():
    assert PushRetry(min_backoff_seconds=10, max_backoff_seconds=600).attempt_offsets_seconds(5) == [
        0,
        10,
        20,
        30,
        40,
    ]


EVENTARC_JOB = replace(PUSH_JOB, name="uploads", trigger="eventarc", bucket="acme-uploads")


@pytest.mark.parametrize("age", [24 * 3600, 23 * 3600 + 1])
def test_an_eventarc_jobs_event_age_must_be_well_under_eventarcs_24_hours(age):
    (problem,) = find_problems([replace(TEAM, event_jobs=[replace(EVENTARC_JOB, max_event_age_seconds=age)])])
    assert (problem.job, problem.field) == ("uploads", "max_event_age_seconds")
    assert "24 hours" in problem.message and "82800" in problem.fix


def test_the_default_event_age_suits_an_eventarc_job():
    assert find_problems([replace(TEAM, event_jobs=[EVENTARC_JOB])]) == []


def test_a_push_job_may_keep_events_a_day_when_its_retry_window_is_longer():
    assert problems(max_event_age_seconds=24 * 3600, max_delivery_attempts=14) == []
