"""A job's calendar through `@deduplicated` (docs/schedules/calendars.md), on both stores:
a scheduled delivery outside the active window or on an excluded date, read in the job's time zone,
is answered 200 `excluded`, recorded `excluded` with why, and its body never starts; a forced run
is not excluded; a header the handler cannot read is answered `misconfigured` with nothing
written. Deliveries are shaped as Scheduler sends them, the calendar header as the stack writes it."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta

import pytest

from runonce.contract import CALENDAR_HEADER, EXCLUDED_BECAUSE_FIELD, RunStatus
from runonce.scheduler.exclusion import JobCalendar
from runonce.scheduler.expected import expected_times
from stacks.team import Job, Window
from tests.core.conftest import scheduler_headers

pytestmark = pytest.mark.both_stores

NEW_YORK_EVENING = "2026-11-29T03:00:00Z"
"""22:00 on 28 November in New York, 03:00 on 29 November in UTC: the clock fixture's run."""


def _deliver(client, calendar: JobCalendar | None, time: str = NEW_YORK_EVENING):
    headers = scheduler_headers(time=time)
    if calendar is not None:
        headers[CALENDAR_HEADER] = calendar.header_value()
    answer = client.post("/", headers=headers)
    return answer.status_code, answer.get_json()


def test_a_run_on_an_excluded_date_in_the_jobs_zone_is_recorded_excluded_and_never_run(
    client, probe, records
):
    holiday = JobCalendar("America/New_York", excluded=frozenset({date(2026, 11, 28)}))
    for _ in range(2):  # a retry or a duplicate delivery is answered the same
        status, body = _deliver(client, holiday)
        assert (status, body["outcome"], body["excluded_because"]) == (200, "excluded", "excluded_date")
    assert probe.count == 0
    [record] = records()
    assert record["status"] == RunStatus.EXCLUDED.value
    assert record[EXCLUDED_BECAUSE_FIELD] == "excluded_date"
    assert (record["job"], record["schedule_time"], record["attempts"]) == (
        "nightly-report",
        NEW_YORK_EVENING,
        0,
    )


def test_the_same_date_in_utc_does_not_exclude_a_run_whose_date_there_is_the_next(client, probe):
    status, body = _deliver(client, JobCalendar("UTC", excluded=frozenset({date(2026, 11, 28)})))
    assert (status, body["outcome"], probe.count) == (200, "completed", 1)


@pytest.mark.parametrize(
    ("window", "because"),
    [
        ({"end": date(2026, 11, 27)}, "after_window"),
        ({"start": date(2026, 11, 29)}, "before_window"),
    ],
)
def test_a_run_outside_the_active_window_is_excluded(client, probe, records, window, because):
    status, body = _deliver(client, JobCalendar("America/New_York", **window))
    assert (status, body["outcome"], body["excluded_because"], probe.count) == (200, "excluded", because, 0)
    assert [record[EXCLUDED_BECAUSE_FIELD] for record in records()] == [because]


def test_a_run_inside_the_window_on_its_last_day_runs(client, probe):
    window = JobCalendar("America/New_York", start=date(2026, 11, 1), end=date(2026, 11, 28))
    status, body = _deliver(client, window)
    assert (status, body["outcome"], probe.count) == (200, "completed", 1)


def test_a_forced_run_on_an_excluded_date_runs(client, probe):
    holiday = JobCalendar("America/New_York", excluded=frozenset({date(2026, 11, 28)}))
    # A "Force run" carries the next scheduled time, ahead of the clock (03:00:05Z).
    status, body = _deliver(client, holiday, time="2026-11-29T03:30:00Z")
    assert (status, body["outcome"], probe.count) == (200, "completed", 1)


def test_an_unreadable_calendar_header_is_misconfigured_and_writes_nothing(client, probe, records):
    headers = {**scheduler_headers(), CALENDAR_HEADER: '{"time_zone": "Mars/Olympus"}'}
    answer = client.post("/", headers=headers)
    assert (answer.status_code, answer.get_json()["outcome"]) == (500, "misconfigured")
    assert "Mars/Olympus" in answer.get_json()["error"]
    assert (probe.count, records()) == (0, [])


def test_excluded_ticks_across_both_dst_days_in_berlin_are_exactly_the_excluded_local_dates(
    client, probe, records, clock
):
    # 00:30 Berlin is 22:30 or 23:30 UTC the day before, the offset changing on both DST days: a
    # date read in UTC, or with a fixed offset, would exclude the wrong ticks.
    excluded = {date(2026, 3, 29), date(2026, 10, 25)}
    calendar = JobCalendar("Europe/Berlin", excluded=frozenset(excluded))
    ticks = [
        tick
        for start in (datetime(2026, 3, 27, tzinfo=UTC), datetime(2026, 10, 23, tzinfo=UTC))
        for tick in expected_times("30 0 * * *", "Europe/Berlin", start, start + timedelta(days=4))
    ]
    outcomes = {}
    for tick in ticks:
        clock.current = tick + timedelta(seconds=5)
        outcomes[tick] = _deliver(client, calendar, time=tick.strftime("%Y-%m-%dT%H:%M:%SZ"))[1]["outcome"]
    excluded_ticks = sorted(tick for tick, outcome in outcomes.items() if outcome == "excluded")
    assert excluded_ticks == [
        datetime(2026, 3, 28, 23, 30, tzinfo=UTC),
        datetime(2026, 10, 24, 22, 30, tzinfo=UTC),
    ]
    assert probe.count == len(ticks) - 2
    assert sorted(record["status"] for record in records()).count("excluded") == 2


def test_a_campaign_runs_its_n_ticks_across_a_dst_change_and_answers_the_next_excluded(
    client, probe, records, clock
):
    # Daily at 09:00 in Berlin from 23 October 2026, three runs, as the stack computes the window:
    # the third is at 08:00 UTC on 25 October (Berlin is back on +01:00), the fourth the next day;
    # the tick of the 22nd is before the window.
    campaign = Job(
        name="nightly-report",
        schedule="0 9 * * *",
        source="report",
        time_zone="Europe/Berlin",
        active=Window(start=date(2026, 10, 23), runs=3),
    ).calendar
    assert campaign is not None
    ticks = expected_times(
        "0 9 * * *", "Europe/Berlin", datetime(2026, 10, 22, tzinfo=UTC), datetime(2026, 10, 27, tzinfo=UTC)
    )
    answers = []
    for tick in [*ticks, ticks[-1]]:  # the last tick delivered twice, as a retry would
        clock.current = tick + timedelta(seconds=5)
        status, body = _deliver(client, campaign, time=tick.strftime("%Y-%m-%dT%H:%M:%SZ"))
        answers.append((tick.strftime("%d %H:%M"), status, body["outcome"], body.get("excluded_because")))
    assert answers == [
        ("22 07:00", 200, "excluded", "before_window"),
        ("23 07:00", 200, "completed", None),
        ("24 07:00", 200, "completed", None),
        ("25 08:00", 200, "completed", None),
        ("26 08:00", 200, "excluded", "after_window"),
        ("26 08:00", 200, "excluded", "after_window"),
    ]
    assert probe.count == 3
    excluded = [record[EXCLUDED_BECAUSE_FIELD] for record in records() if record["status"] == "excluded"]
    assert sorted(excluded) == ["after_window", "before_window"]


def test_a_calendar_header_whose_last_run_is_no_utc_time_is_misconfigured(client, probe, records):
    header = '{"time_zone": "Europe/Berlin", "start": "2026-11-01", "last_run": "2026-11-30 09:00"}'
    answer = client.post("/", headers={**scheduler_headers(), CALENDAR_HEADER: header})
    assert (answer.status_code, answer.get_json()["outcome"]) == (500, "misconfigured")
    assert "last_run that is no RFC 3339 UTC time: '2026-11-30 09:00'" in answer.get_json()["error"]
    assert (probe.count, records()) == (0, [])
