"""Cloud Scheduler's retry_config, as its reference documents it."""

from datetime import UTC, datetime, timedelta

from localscheduler.scheduler.retry import RetryPolicy
from stacks.team import Retry

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def _offsets(policy: RetryPolicy, window_seconds: float) -> list[float]:
    return [(t - T0).total_seconds() for t in policy.retry_times(T0, T0 + timedelta(seconds=window_seconds))]


def test_backoff_doubles_max_doublings_times_then_grows_linearly_up_to_max_backoff():
    policy = RetryPolicy(
        Retry(retry_count=5, min_backoff_seconds=10, max_backoff_seconds=300, max_doublings=3)
    )
    assert [policy.backoff(n) for n in range(1, 9)] == [10, 20, 40, 80, 160, 240, 300, 300]


def test_a_failed_run_is_retried_retry_count_times():
    policy = RetryPolicy(
        Retry(retry_count=3, min_backoff_seconds=10, max_backoff_seconds=300, max_doublings=3)
    )
    assert _offsets(policy, 3600) == [10, 30, 70]


def test_retries_stop_at_the_next_scheduled_time():
    policy = RetryPolicy(Retry(retry_count=5, min_backoff_seconds=5, max_backoff_seconds=60, max_doublings=3))
    assert _offsets(policy, 120) == [5, 15, 35, 75]


def test_zero_retry_count_and_zero_duration_mean_no_retry():
    policy = RetryPolicy(Retry(retry_count=0, max_retry_duration_seconds=0))
    assert _offsets(policy, 3600) == []


def test_max_retry_duration_keeps_retrying_until_both_limits_are_reached():
    policy = RetryPolicy(
        Retry(
            retry_count=1,
            max_retry_duration_seconds=100,
            min_backoff_seconds=10,
            max_backoff_seconds=10,
            max_doublings=0,
        )
    )
    assert _offsets(policy, 3600) == [10, 20, 30, 40, 50, 60, 70, 80, 90]
