"""Reading a Scheduler delivery: headers, RFC 3339 instants, and every way a request can be bad."""

from datetime import UTC, datetime, timedelta

import pytest

from runonce._instant import parse_instant
from runonce.scheduler.delivery import BadDelivery, parse_delivery

from .conftest import scheduler_headers

pytestmark = pytest.mark.fast  # no store: the decision logic alone

NOW = datetime(2026, 11, 29, 3, 0, 5, tzinfo=UTC)
SKEW = timedelta(seconds=60)


def test_headers_are_read_whatever_their_case():
    upper = {name.upper(): value for name, value in scheduler_headers().items()}
    lower = {name.lower(): value for name, value in scheduler_headers().items()}
    assert parse_delivery(upper, NOW, SKEW) == parse_delivery(lower, NOW, SKEW)


def test_offsets_name_the_same_utc_instant():
    assert parse_instant("2026-11-29T04:00:00+01:00") == parse_instant("2026-11-29T03:00:00Z")
    assert parse_instant("2026-11-28T22:30:00-04:30") == parse_instant("2026-11-29T03:00:00z")


def test_fractions_are_kept_to_the_nanosecond():
    assert parse_instant("2026-11-29T03:00:00.5Z").rfc3339() == "2026-11-29T03:00:00.500000000Z"
    assert parse_instant("2026-11-29T03:00:00.000000001Z") != parse_instant("2026-11-29T03:00:00Z")
    assert parse_instant("2026-11-29T03:00:00.000Z") == parse_instant("2026-11-29T03:00:00Z")


@pytest.mark.parametrize(
    "text",
    [
        "2026-11-29",
        "2026-11-29T03:00:00",
        "2026-11-29 03:00:00Z",
        "2026-13-29T03:00:00Z",
        "2026-02-30T03:00:00Z",
        "2026-11-29T24:00:00Z",
        "2026-11-29T03:00:00+25:00",
        "2026-11-29T03:00:00.1234567890Z",
        "1764385200",
        "tomorrow",
    ],
)
def test_malformed_schedule_time_is_rejected_naming_the_header(text):
    with pytest.raises(BadDelivery) as caught:
        parse_delivery(scheduler_headers(time=text), NOW, SKEW)
    assert caught.value.header == "X-CloudScheduler-ScheduleTime"
    assert (
        "RFC 3339" in str(caught.value) or "real date" in str(caught.value) or "offset" in str(caught.value)
    )


@pytest.mark.parametrize("missing", ["X-CloudScheduler-JobName", "X-CloudScheduler-ScheduleTime"])
def test_missing_required_header_is_rejected(missing):
    headers = {name: value for name, value in scheduler_headers().items() if name != missing}
    with pytest.raises(BadDelivery, match=f"{missing}: missing"):
        parse_delivery(headers, NOW, SKEW)


def test_blank_job_name_counts_as_missing():
    with pytest.raises(BadDelivery, match="JobName: missing"):
        parse_delivery(scheduler_headers(job="   "), NOW, SKEW)


@pytest.mark.parametrize(
    "header, field",
    [
        ("X-CloudScheduler-JobName", "job"),
        ("X-CloudScheduler-ScheduleTime", "time"),
        ("X-Runonce-Project", "project"),
        ("X-Runonce-Location", "location"),
    ],
)
def test_oversized_header_is_rejected(header, field):
    with pytest.raises(BadDelivery, match=f"{header}: .* more than"):
        parse_delivery(scheduler_headers(**{field: "x" * 1000}), NOW, SKEW)


def test_project_and_location_are_optional_for_jobs_made_outside_the_stack():
    headers = scheduler_headers()
    del headers["X-Runonce-Project"], headers["X-Runonce-Location"]
    delivery = parse_delivery(headers, NOW, SKEW)
    assert (delivery.project, delivery.location) == ("", "")


def test_schedule_time_beyond_the_skew_allowance_is_a_forced_run():
    assert parse_delivery(scheduler_headers(time="2026-11-29T03:01:06Z"), NOW, SKEW).forced
    assert not parse_delivery(scheduler_headers(time="2026-11-29T03:01:04Z"), NOW, SKEW).forced
    assert not parse_delivery(scheduler_headers(time="2026-11-29T02:00:00Z"), NOW, SKEW).forced
