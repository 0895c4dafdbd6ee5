"""A job's calendar in the watchdog (runonce.scheduler.watchdog): the ticks it excludes, read in the
job's time zone, or after a campaign's last run, are never reported missed and never caught up; the
calendar comes from the job's JSON as the stack writes it. On the in-memory stores, the Firestore
emulator and a Valkey server."""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import UTC, date, datetime, timedelta

import pytest

from runonce.core.errors import ConfigError
from runonce.scheduler.exclusion import JobCalendar, parse_calendar
from runonce.scheduler.watchdog import Watch, check, parse_jobs
from stacks.team import Job, Window
from tests.watchdog.conftest import watchdog_lines
from tests.watchdog.test_catch_up import CATCHING, Scheduler
from tests.watchdog.test_check import LOCATION, PROJECT, SYNC, TEAM, at

# Every 10 minutes in Berlin, where 29 November begins at 23:00 UTC on the 28th. The tick at 01:15
# UTC judges (23:15 UTC on the 28th, 00:55] (a 2-hour lookback, a 20-minute grace): all on the 29th.
BERLIN = replace(SYNC, time_zone="Europe/Berlin", since=at(-61))


def _reported(stores, clock, capsys, job, scheduler=None) -> list[str]:
    clock.current = at(75)
    check(Watch(TEAM, PROJECT, LOCATION, (job,)), stores.ledger, stores.claims, scheduler=scheduler)
    return [line["schedule_time"] for line in watchdog_lines(capsys.readouterr().out)]


def test_ticks_on_an_excluded_date_in_the_jobs_zone_are_not_reported_missed(stores, clock, capsys):
    excluding = replace(
        BERLIN, calendar=JobCalendar("Europe/Berlin", excluded=frozenset({date(2026, 11, 29)}))
    )
    assert _reported(stores, clock, capsys, excluding) == []
    # The same ticks without the calendar: 23:20 to 00:50 UTC, none delivered, all missed.
    assert len(_reported(stores, clock, capsys, BERLIN)) == 10


def test_ticks_before_the_window_are_not_reported_but_those_inside_are(stores, clock, capsys):
    # Berlin's 29 November starts at 23:00 UTC on the 28th; in UTC it would start an hour later.
    starting = replace(BERLIN, calendar=JobCalendar("Europe/Berlin", start=date(2026, 11, 29)))
    # A 3-hour lookback judges from 22:20 UTC: 23:20 in Berlin on the 28th, before the window.
    reported = _reported(
        stores, clock, capsys, replace(starting, since=at(-181), lookback=timedelta(hours=3))
    )
    assert reported[0] == "2026-11-28T23:00:00Z" and len(reported) == 12


def test_an_excluded_tick_within_the_catch_up_window_is_never_started(stores, clock, capsys):
    scheduler = Scheduler(stores, clock)
    holiday = JobCalendar("Etc/UTC", excluded=frozenset({date(2026, 11, 29)}))
    assert _reported(stores, clock, capsys, replace(CATCHING, calendar=holiday), scheduler) == []
    assert scheduler.runs == []


ENTRY = {
    "job": "sync",
    "scheduler_job": "orders-sync",
    "schedule": "*/10 * * * *",
    "time_zone": "Europe/Berlin",
    "grace_seconds": 1200,
    "lookback_seconds": 7200,
    "since": "2026-11-28T23:59:00Z",
}


def test_the_calendar_is_read_from_the_jobs_json_and_is_none_without_one():
    calendar = JobCalendar("Europe/Berlin", end=date(2027, 1, 1), excluded=frozenset({date(2026, 12, 25)}))
    [plain] = parse_jobs(json.dumps([ENTRY]), "RUNONCE_WATCHDOG_JOBS")
    [dated] = parse_jobs(
        json.dumps([{**ENTRY, "calendar": calendar.header_value()}]), "RUNONCE_WATCHDOG_JOBS"
    )
    assert (plain.calendar, dated.calendar) == (None, calendar)
    with pytest.raises(ConfigError, match=r"RUNONCE_WATCHDOG_JOBS\[0\] \(job 'sync'\): calendar: .*not JSON"):
        parse_jobs(json.dumps([{**ENTRY, "calendar": "{"}]), "RUNONCE_WATCHDOG_JOBS")


def _campaign(runs: int, time_zone: str) -> JobCalendar:
    """The calendar the stack sends for an every-ten-minutes campaign from 28 November 2026 (its
    X-Runonce-Calendar text, read back as the watchdog reads its entry)."""
    job = Job(
        name="sync",
        schedule="*/10 * * * *",
        source="sync",
        time_zone=time_zone,
        active=Window(start=date(2026, 11, 28), runs=runs),
    )
    assert job.calendar is not None
    return parse_calendar(job.calendar.header_value())


def test_ticks_after_a_campaigns_last_run_are_not_reported_missed(stores, clock, capsys):
    # From midnight on the 28th in Berlin (23:00 UTC on the 27th), run 150 is at 23:50 UTC on the
    # 28th: of the judged ticks (23:20 to 00:50 UTC) only the first four belong to the campaign.
    campaign = _campaign(150, "Europe/Berlin")
    assert campaign.last_run == at(-10)
    assert _reported(stores, clock, capsys, replace(BERLIN, calendar=campaign)) == [
        "2026-11-28T23:20:00Z",
        "2026-11-28T23:30:00Z",
        "2026-11-28T23:40:00Z",
        "2026-11-28T23:50:00Z",
    ]


def test_a_tick_after_a_campaigns_last_run_within_the_catch_up_window_is_never_started(stores, clock, capsys):
    # In UTC, run 144 is at 23:50 on the 28th: every judged tick comes after it.
    campaign = _campaign(144, "Etc/UTC")
    assert campaign.last_run == at(-10)
    scheduler = Scheduler(stores, clock)
    assert _reported(stores, clock, capsys, replace(CATCHING, calendar=campaign), scheduler) == []
    assert scheduler.runs == []


def test_on_the_fall_back_day_in_berlin_every_tick_of_the_excluded_local_date_is_unreported(
    stores, clock, capsys
):
    # Every 30 minutes; 25 October 2026 in Berlin runs from 22:00 UTC on the 24th (00:00 CEST) to
    # 23:00 UTC on the 25th, its 02:00-03:00 hour twice (00:00-01:59 UTC). Judged: (21:00, 02:00]
    # UTC. Only 21:30 UTC (23:30 CEST on the 24th) is on another local date.
    half_hourly = replace(
        BERLIN,
        schedule="*/30 * * * *",
        since=datetime(2026, 10, 24, 21, tzinfo=UTC),
        lookback=timedelta(hours=5, minutes=20),
        calendar=JobCalendar("Europe/Berlin", excluded=frozenset({date(2026, 10, 25)})),
    )
    clock.current = datetime(2026, 10, 25, 2, 20, tzinfo=UTC)
    check(Watch(TEAM, PROJECT, LOCATION, (half_hourly,)), stores.ledger, stores.claims)
    reported = [line["schedule_time"] for line in watchdog_lines(capsys.readouterr().out)]
    assert reported == ["2026-10-24T21:30:00Z"]
