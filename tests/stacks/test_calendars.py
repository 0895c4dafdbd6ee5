"""Calendars in the stacks (docs/schedules/calendars.md): the calendar a team file gives
`Job.active` and `Job.exclude` reaches the handler in the X-Runonce-Calendar header of the Scheduler
job (functions, Cloud Run services, App Engine alike) and of the local Scheduler, and reads back as
the same calendar; synth refuses a window that has ended, dates outside it, and a calendar that
excludes every tick, naming the job, the field and the fix."""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import UTC, date, datetime

import pytest

import runonce
from localscheduler.scheduler.delivery import scheduler_headers
from runonce.contract import CALENDAR_HEADER, WATCHDOG_JOBS_VARIABLE, Excluded
from runonce.scheduler.exclusion import JobCalendar, job_calendar
from runonce.scheduler.watchdog import parse_jobs
from stacks.config import ticks
from stacks.config.headers import job_headers
from stacks.team import AppEngineJob, Calendar, Job, Service, ServiceJob, Team, Window
from stacks.validate import find_problems
from tests.conftest import ManualClock
from tests.stacks.conftest import synthesize
from tests.stacks.test_schedules import sent_headers, watchdog_env

ACTIVE = Window(start=date(2026, 12, 1), end=date(2027, 3, 31))
HOLIDAYS = Calendar(dates=[date(2026, 12, 25), date(2027, 1, 1)])
BERLIN_REPORT = Job(
    name="report",
    schedule="0 7 * * 1-5",
    source="report",
    time_zone="Europe/Berlin",
    active=ACTIVE,
    exclude=HOLIDAYS,
)
TEAM = Team(name="acme", project="acme-prod-1", region="europe-west1", jobs=[BERLIN_REPORT], alerts=False)
CALENDAR = JobCalendar(
    "Europe/Berlin", date(2026, 12, 1), date(2027, 3, 31), frozenset({date(2026, 12, 25), date(2027, 1, 1)})
)


@pytest.fixture(autouse=True)
def today():
    """Synth runs on 7 December 2026 (runonce's clock), inside ACTIVE."""
    runonce.set_clock(ManualClock(datetime(2026, 12, 7, 6, 30, tzinfo=UTC)))
    yield
    runonce.set_clock(None)


def test_the_calendar_header_the_stack_sends_reads_back_as_the_jobs_calendar(archive_dir):
    team = replace(
        TEAM,
        services=[Service(name="api")],
        service_jobs=[ServiceJob(name="close", schedule="0 7 * * *", service="api", exclude=HOLIDAYS)],
        app_engine_jobs=[AppEngineJob(name="sweep", schedule="0 9 * * *", relative_uri="/s", active=ACTIVE)],
        app_engine_location="europe-west",
    )
    synth = synthesize(team, archive_dir)
    assert job_calendar(sent_headers(synth, "report")) == CALENDAR
    assert job_calendar(sent_headers(synth, "close")) == JobCalendar("Etc/UTC", excluded=CALENDAR.excluded)
    assert job_calendar(sent_headers(synth, "sweep")) == JobCalendar("Etc/UTC", ACTIVE.start, ACTIVE.end)


def test_a_job_without_a_calendar_sends_no_calendar_header_and_the_watchdog_none(archive_dir):
    synth = synthesize(replace(TEAM, jobs=[replace(BERLIN_REPORT, active=None, exclude=None)]), archive_dir)
    assert CALENDAR_HEADER not in sent_headers(synth, "report")
    [entry] = json.loads(watchdog_env(synth)[WATCHDOG_JOBS_VARIABLE])
    assert "calendar" not in entry


def test_the_watchdog_reads_the_jobs_calendar_from_its_configuration(archive_dir):
    [entry] = json.loads(watchdog_env(synthesize(TEAM, archive_dir))[WATCHDOG_JOBS_VARIABLE])
    # `since` is a token until apply: the watchdog reads the entry as it will be then.
    [watched] = parse_jobs(json.dumps([{**entry, "since": "2026-12-07T06:00:00Z"}]), WATCHDOG_JOBS_VARIABLE)
    assert watched.calendar == CALENDAR


def test_the_local_scheduler_sends_the_same_calendar_header_as_the_stack():
    local = scheduler_headers(TEAM, BERLIN_REPORT, datetime(2026, 12, 8, 6, tzinfo=UTC))
    stack = job_headers(TEAM.project, TEAM.region, BERLIN_REPORT.overlap, BERLIN_REPORT.calendar)
    assert local[CALENDAR_HEADER] == stack[CALENDAR_HEADER]
    assert job_calendar(local) == CALENDAR


# --- validation ---


def problems(**changes) -> list[tuple[str | None, str, str]]:
    found = find_problems([replace(TEAM, jobs=[replace(BERLIN_REPORT, **changes)])])
    return [(problem.job, problem.field, problem.message) for problem in found]


def test_a_job_with_a_calendar_inside_its_window_is_valid():
    assert problems() == []


def test_a_window_that_has_ended_is_refused():
    [(job, field, message)] = problems(active=Window(end=date(2026, 12, 6)), exclude=None)
    assert (job, field) == ("report", "active.end")
    assert "2026-12-06 has passed (today is 2026-12-07 in Europe/Berlin)" in message


def test_a_window_ending_today_in_the_jobs_zone_is_not_ended():
    # 06:30 UTC on 7 December is 07:30 in Berlin: a 07:00 tick today has passed, tomorrow's are after
    # the end, so only the "every tick excluded" rule speaks, not the ended window.
    found = problems(active=Window(end=date(2026, 12, 7)), exclude=None)
    assert [(job, field) for job, field, _ in found] == [("report", "active")]
    assert "every tick would be excluded" in found[0][2]


def test_a_window_starting_after_it_ends_is_refused():
    found = problems(active=Window(start=date(2027, 2, 1), end=date(2027, 1, 1)), exclude=None)
    assert [(job, field) for job, field, _ in found][:1] == [("report", "active.start")]


def test_excluded_dates_outside_the_window_or_not_dates_are_refused_each_by_index():
    found = problems(exclude=Calendar(dates=[date(2026, 12, 25), date(2027, 4, 1), datetime(2027, 1, 1, 9)]))
    assert [(job, field) for job, field, _ in found] == [
        ("report", "exclude.dates[1]"),
        ("report", "exclude.dates[2]"),
    ]
    assert "outside active (2026-12-01 to 2027-03-31)" in found[0][2]


def test_a_calendar_excluding_every_tick_left_is_refused():
    # Weekdays only, a window of one weekend and a Monday that is excluded.
    found = problems(
        active=Window(start=date(2026, 12, 12), end=date(2026, 12, 14)),
        exclude=Calendar([date(2026, 12, 14)]),
    )
    assert [(job, field) for job, field, _ in found] == [("report", "exclude")]


def test_an_open_window_with_many_excluded_days_still_finds_a_tick():
    days = [date(2026, 12, 1 + offset) for offset in range(31)]
    assert problems(active=None, exclude=Calendar(days)) == []


def test_a_calendar_of_a_job_with_an_unknown_time_zone_is_reported_on_the_zone_alone():
    assert [(job, field) for job, field, _ in problems(time_zone="Mars/Olympus")] == [("report", "time_zone")]


# --- campaigns: Window(start=..., runs=N) ---

# Daily at 09:00 in Berlin from Friday 26 March 2027: Berlin moves to summer time on Sunday 28
# March, so the first two runs are at 08:00 UTC and the next three at 07:00 UTC.
CAMPAIGN = replace(
    BERLIN_REPORT, schedule="0 9 * * *", active=Window(start=date(2027, 3, 26), runs=5), exclude=None
)


def test_a_campaigns_window_ends_at_its_nth_run_read_in_its_zone_across_a_dst_change(archive_dir):
    synth = synthesize(replace(TEAM, jobs=[CAMPAIGN]), archive_dir)
    sent = job_calendar(sent_headers(synth, "report"))
    # 09:00 CEST on 30 March; a fixed +01:00 offset (the zone's on the start date) would say 08:00.
    assert sent == JobCalendar(
        "Europe/Berlin", start=date(2027, 3, 26), last_run=datetime(2027, 3, 30, 7, tzinfo=UTC)
    )
    [entry] = json.loads(watchdog_env(synth)[WATCHDOG_JOBS_VARIABLE])
    [watched] = parse_jobs(json.dumps([{**entry, "since": "2026-12-07T06:00:00Z"}]), WATCHDOG_JOBS_VARIABLE)
    assert watched.calendar == sent
    assert sent.excluded_because(datetime(2027, 3, 30, 7, tzinfo=UTC)) is None
    assert sent.excluded_because(datetime(2027, 3, 31, 7, tzinfo=UTC)) is Excluded.AFTER_WINDOW


def test_service_and_app_engine_campaigns_send_the_last_run_of_their_own_schedule(archive_dir):
    # Daily at 07:00 and 09:00 UTC from 26 March 2027: the fifth run is at 07:00 on the 28th.
    campaign = Window(start=date(2027, 3, 26), runs=5)
    team = replace(
        TEAM,
        jobs=[],
        services=[Service(name="api")],
        service_jobs=[ServiceJob(name="close", schedule="0 7,9 * * *", service="api", active=campaign)],
        app_engine_jobs=[
            AppEngineJob(name="sweep", schedule="0 9 * * *", relative_uri="/s", active=campaign)
        ],
        app_engine_location="europe-west",
    )
    synth = synthesize(team, archive_dir)
    sent = {job: job_calendar(sent_headers(synth, job)) for job in ("close", "sweep")}
    assert {job: calendar.last_run if calendar else None for job, calendar in sent.items()} == {
        "close": datetime(2027, 3, 28, 7, tzinfo=UTC),
        "sweep": datetime(2027, 3, 30, 9, tzinfo=UTC),
    }


def test_ticks_on_excluded_dates_do_not_count_towards_a_campaigns_runs():
    # The Monday is excluded: the five runs end a day later, on Wednesday 31 March.
    calendar = replace(CAMPAIGN, exclude=Calendar([date(2027, 3, 29)])).calendar
    assert calendar is not None and calendar.last_run == datetime(2027, 3, 31, 7, tzinfo=UTC)
    assert calendar.excluded_because(datetime(2027, 3, 29, 7, tzinfo=UTC)) is Excluded.EXCLUDED_DATE
    assert problems(schedule="0 9 * * *", active=CAMPAIGN.active, exclude=Calendar([date(2027, 3, 29)])) == []


def test_a_campaign_counts_every_tick_of_a_day_from_the_start_of_its_first_date():
    # Hourly from midnight in Berlin: the 30th tick is 05:00 on the second day (04:00 UTC).
    hourly = replace(CAMPAIGN, schedule="0 * * * *", active=Window(start=date(2027, 1, 4), runs=30))
    assert hourly.calendar is not None
    assert hourly.calendar.last_run == datetime(2027, 1, 5, 4, tzinfo=UTC)


def test_a_valid_campaign_is_accepted():
    assert problems(schedule="0 9 * * *", active=CAMPAIGN.active, exclude=None) == []


@pytest.mark.parametrize(
    ("window", "words"),
    [
        (Window(start=date(2027, 3, 26), runs=0), "0 is not a number of runs from 1 to 100,000"),
        (Window(start=date(2027, 3, 26), runs=100_001), "is not a number of runs from 1 to 100,000"),
        (Window(start=date(2027, 3, 26), runs=True), "True is not a number of runs"),
        (
            Window(start=date(2027, 3, 26), end=date(2027, 4, 30), runs=5),
            "given with active.end (2027-04-30)",
        ),
        (Window(runs=5), "counts runs from active.start, which is not set"),
        # Daily from 1 December: the third run was at 07:00 on the 3rd, before today (the 7th).
        (
            Window(start=date(2026, 12, 1), runs=3),
            "run 3 from 2026-12-01 was at 2026-12-03 09:00 Europe/Berlin",
        ),
    ],
    ids=["no runs", "too many runs", "a bool", "end and runs", "no start", "already past"],
)
def test_a_campaign_synth_cannot_count_is_refused_on_active_runs(window, words):
    [(job, field, message)] = problems(schedule="0 9 * * *", active=window, exclude=None)
    assert (job, field) == ("report", "active.runs")
    assert words in message


def test_an_excluded_date_after_a_campaigns_last_run_is_refused_as_outside_it():
    found = problems(schedule="0 9 * * *", active=CAMPAIGN.active, exclude=Calendar([date(2027, 3, 31)]))
    assert [(job, field) for job, field, _ in found] == [("report", "exclude.dates[0]")]
    assert "outside active (2027-03-26 to 2027-03-30)" in found[0][2]


def test_a_campaign_whose_runs_the_excluded_days_use_up_is_refused(monkeypatch):
    # The search steps over at most MAX_EXCLUDED_DAYS excluded days; past that it finds no Nth run.
    monkeypatch.setattr(ticks, "MAX_EXCLUDED_DAYS", 2)
    ticks.campaign_last_run.cache_clear()
    excluded = Calendar([date(2027, 3, 26), date(2027, 3, 27), date(2027, 3, 28)])
    found = problems(schedule="0 9 * * *", active=CAMPAIGN.active, exclude=excluded)
    ticks.campaign_last_run.cache_clear()
    assert [(job, field) for job, field, _ in found] == [("report", "active.runs")]
    assert "fewer than 5 runs from 2027-03-26" in found[0][2]


def test_a_campaign_of_a_job_with_an_unreadable_schedule_is_reported_on_the_schedule_alone():
    found = problems(schedule="0 9 * *", active=CAMPAIGN.active, exclude=None)
    assert [(job, field) for job, field, _ in found] == [("report", "schedule")]
