"""Expected runs of a scheduled job: cron in its time zone, and the key its delivery gets."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from runonce.scheduler.delivery import parse_delivery
from runonce.scheduler.expected import expected_times, scheduled_key
from runonce.scheduler.keys import run_key

pytestmark = pytest.mark.fast  # no store: the decision logic alone


def utc(text: str) -> datetime:
    return datetime.fromisoformat(text).replace(tzinfo=UTC)


def test_times_are_utc_instants_in_the_half_open_window():
    times = expected_times("*/15 * * * *", "Etc/UTC", utc("2026-03-01T00:00"), utc("2026-03-01T01:00"))
    assert times == [
        utc("2026-03-01T00:15"),
        utc("2026-03-01T00:30"),
        utc("2026-03-01T00:45"),
        utc("2026-03-01T01:00"),
    ]


def test_spring_forward_runs_once_as_the_gap_ends():
    # Europe/Berlin jumps from 02:00 to 03:00 on 2026-03-29: 02:30 does not exist that day, and
    # cronsim (as cron) fires once at 03:00 local, 01:00 UTC; the issue asks for cronsim's rule.
    times = expected_times("30 2 * * *", "Europe/Berlin", utc("2026-03-27T12:00"), utc("2026-03-31T12:00"))
    assert times == [
        utc("2026-03-28T01:30"),
        utc("2026-03-29T01:00"),
        utc("2026-03-30T00:30"),
        utc("2026-03-31T00:30"),
    ]


def test_fall_back_runs_the_repeated_local_time_once():
    # Europe/Berlin repeats 02:00-03:00 on 2026-10-25: 02:30 happens twice, the job runs once.
    times = expected_times("30 2 * * *", "Europe/Berlin", utc("2026-10-24T12:00"), utc("2026-10-26T12:00"))
    assert times == [utc("2026-10-25T00:30"), utc("2026-10-26T01:30")]


def test_naive_bounds_are_refused():
    with pytest.raises(ValueError, match="timezone-aware"):
        expected_times("* * * * *", "Etc/UTC", datetime(2026, 1, 1), utc("2026-01-02T00:00"))


def test_key_is_the_key_of_the_scheduled_delivery():
    headers = {
        "X-CloudScheduler-JobName": "orders-nightly",
        "X-CloudScheduler-ScheduleTime": "2026-03-01T03:00:00+01:00",
        "X-Runonce-Project": "p1",
        "X-Runonce-Location": "europe-west1",
    }
    delivery = parse_delivery(headers, now=utc("2026-03-01T02:00:30"), forced_skew=timedelta(minutes=5))
    assert not delivery.forced
    assert scheduled_key("orders-nightly", utc("2026-03-01T02:00"), "p1", "europe-west1") == run_key(delivery)
    assert scheduled_key("orders-nightly", utc("2026-03-01T02:01"), "p1", "europe-west1") != run_key(delivery)
