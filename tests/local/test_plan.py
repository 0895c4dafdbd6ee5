"""Cron schedules are evaluated in the job's own time zone, like Cloud Scheduler does."""

from datetime import UTC, datetime

from localscheduler.scheduler.plan import planned_runs
from stacks.team import Job, Team


def _team(schedule: str, time_zone: str) -> tuple[Team, Job]:
    job = Job(name="nightly", schedule=schedule, time_zone=time_zone, source="report")
    return Team(name="t", project="p", region="europe-west1", jobs=[job]), job


def test_a_schedule_follows_daylight_saving_time_in_its_zone():
    team, job = _team("0 9 * * *", "America/New_York")
    runs = planned_runs(team, job, datetime(2026, 3, 7, tzinfo=UTC), datetime(2026, 3, 10, tzinfo=UTC))
    assert [run.schedule_time.hour for run in runs] == [14, 13, 13]  # EST, then EDT from 8 March


def test_a_time_the_clock_skips_does_not_run():
    team, job = _team("*/30 * * * *", "Europe/Berlin")
    runs = planned_runs(
        team,
        job,
        datetime(2026, 3, 29, 0, 0, tzinfo=UTC),
        datetime(2026, 3, 29, 1, 30, tzinfo=UTC),
    )
    utc = [run.schedule_time.strftime("%H:%M") for run in runs]
    assert utc == ["00:30", "01:00", "01:30"]  # 01:30, 03:00, 03:30 Berlin: 02:00-02:59 does not exist


def test_each_run_knows_when_the_next_one_is_scheduled():
    team, job = _team("*/10 * * * *", "Etc/UTC")
    runs = planned_runs(team, job, datetime(2026, 1, 1, tzinfo=UTC), datetime(2026, 1, 1, 0, 30, tzinfo=UTC))
    assert [run.next_time for run in runs[:-1]] == [run.schedule_time for run in runs[1:]]
    assert runs[-1].next_time == datetime(2026, 1, 1, 0, 40, tzinfo=UTC)
