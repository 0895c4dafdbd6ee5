"""A job's calendar in `runonce runs` (docs/schedules/calendars.md), on real records: a tick
the calendar excludes is listed `excluded`, with why, whether its delivery was recorded or never
came, never `missing`; the ticks it does not exclude are listed as before. Scheduler-shaped
deliveries to a served job on both DST days of a Berlin job, on Firestore and on Valkey, are
answered `excluded` exactly on the excluded local dates and listed so."""

from __future__ import annotations

import json
import os
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from operate.team import ScheduledJob, resolve
from runonce.contract import CALENDAR_HEADER, EXCLUDED_BECAUSE_FIELD, RunStatus
from runonce.core.store import Refusal
from runonce.scheduler.expected import expected_times
from tests.conftest import SCHEDULED
from tests.operate.conftest import ON_BOTH_STORES, scheduler_headers


def _exclude_the_29th(ops) -> None:
    """The `report` job (every 10 minutes, UTC) excludes 29 November 2026, the clock's date."""
    path = Path(os.environ["RUNONCE_TEAMS_DIR"]) / f"{ops.team.name}.py"
    text = path.read_text()
    text = text.replace(
        "from stacks.team import", "from datetime import date\n\nfrom stacks.team import Calendar,"
    )
    old = 'Job(name="report", schedule="*/10 * * * *", source="report")'
    assert old in text
    text = text.replace(old, old[:-1] + ", exclude=Calendar(dates=[date(2026, 11, 29)]))")
    path.write_text(text)


def test_runs_lists_excluded_ticks_recorded_or_not_and_the_others_as_before(ops):
    _exclude_the_29th(ops)
    recorded = ops.scheduled_key(SCHEDULED)
    fields = {"job": ops.team.jobs[0].scheduler_job, "schedule_time": "2026-11-29T03:00:00Z", "forced": False}
    excluded = {**fields, "status": RunStatus.EXCLUDED.value, EXCLUDED_BECAUSE_FIELD: "excluded_date"}
    assert (
        ops.store.amend(recorded, lambda record: excluded if record is None else Refusal.RECORDED) == excluded
    )
    result = ops.run("runs", "--team", ops.team.name, "--job", "report", "--since", "3h25m", "--json")
    assert result.exit_code == 0, result.stderr
    rows = [json.loads(line) for line in result.stdout.splitlines()]
    by_time = {row["time"]: row for row in rows}
    assert by_time["2026-11-29T03:00:00+00:00"]["status"] == "excluded"
    assert (
        by_time["2026-11-29T03:00:00+00:00"]["outcome"]
        == "excluded by the job's calendar (excluded_date): not run"
    )
    unrecorded = by_time["2026-11-29T00:00:00+00:00"]
    assert (unrecorded["status"], unrecorded["outcome"]) == (
        "excluded",
        "no record: excluded by the job's calendar (excluded_date)",
    )
    # 23:40 and 23:50 on the 28th: not excluded, never delivered.
    before = [row for row in rows if row["time"] < "2026-11-29"]
    assert before and {row["status"] for row in before} == {"missing"}
    assert {row["status"] for row in rows if row["time"] >= "2026-11-29"} == {"excluded"}


# 00:30 and 02:30 in Berlin, in UTC: 00:30 local is on the UTC date before; on 29 March 2026 02:30
# does not exist and the run is at 03:00 local, on 25 October it is at the first 02:30.
DST_DAYS = {
    datetime(2026, 3, 27, tzinfo=UTC): {"03-28 23:30", "03-29 01:00"},
    datetime(2026, 10, 23, tzinfo=UTC): {"10-24 22:30", "10-25 00:30"},
}


@pytest.mark.parametrize("ledger_kind", ON_BOTH_STORES)
def test_excluded_ticks_on_both_dst_days_in_berlin_are_answered_excluded_and_listed_so(served, clock):
    # `nightly` (Berlin) runs at 00:30 and 02:30 and excludes both DST days: exactly the two ticks
    # of each local date are excluded, never those of the same UTC date (read with UTC or with the
    # offset of the day before, other ticks would be).
    path = Path(os.environ["RUNONCE_TEAMS_DIR"]) / f"{served.ops.team.name}.py"
    text = path.read_text().replace(
        "from stacks.team import", "from datetime import date\n\nfrom stacks.team import Calendar,"
    )
    old = 'Job(name="nightly", schedule="30 2 * * *", time_zone="Europe/Berlin", source="report")'
    assert old in text
    new = (
        'Job(name="nightly", schedule="30 0,2 * * *", time_zone="Europe/Berlin", source="report", '
        "exclude=Calendar(dates=[date(2026, 3, 29), date(2026, 10, 25)]))"
    )
    path.write_text(text.replace(old, new))
    nightly = resolve(served.ops.team.name).job("nightly")
    assert isinstance(nightly, ScheduledJob) and nightly.calendar is not None
    for first, excluded in DST_DAYS.items():
        ticks = expected_times(nightly.schedule, nightly.time_zone, first, first + timedelta(days=4))
        answers = {}
        for tick in ticks:  # each delivered as Scheduler sends it, with the stack's calendar header
            clock.current = tick + timedelta(seconds=5)
            headers = {
                **scheduler_headers(served.ops.team, nightly, tick),
                CALENDAR_HEADER: nightly.calendar.header_value(),
            }
            answer = served.app.test_client().post("/", headers=headers)
            answers[f"{tick:%m-%d %H:%M}"] = (answer.status_code, answer.json["outcome"])
        assert len(answers) == 8
        assert answers == {when: (200, "excluded" if when in excluded else "completed") for when in answers}
        clock.current = ticks[-1] + timedelta(hours=1)
        listed = served.ops.run(
            "runs", "--team", served.ops.team.name, "--job", "nightly", "--since", "5d", "--json"
        )
        assert listed.exit_code == 0, listed.stderr
        statuses = {
            f"{datetime.fromisoformat(row['time']):%m-%d %H:%M}": row["status"]
            for row in map(json.loads, listed.stdout.splitlines())
        }
        assert {when: statuses.get(when) for when in answers} == {
            when: "excluded" if when in excluded else "completed" for when in answers
        }
    assert len(served.runs) == 12


def test_runs_lists_the_ticks_before_and_after_a_campaigns_runs_excluded_with_why(ops):
    # Ten runs from midnight UTC on 29 November: 00:00 to 01:30; the clock is at 03:00:05.
    path = Path(os.environ["RUNONCE_TEAMS_DIR"]) / f"{ops.team.name}.py"
    text = path.read_text().replace(
        "from stacks.team import", "from datetime import date\n\nfrom stacks.team import Window,"
    )
    old = 'Job(name="report", schedule="*/10 * * * *", source="report")'
    assert old in text
    path.write_text(text.replace(old, old[:-1] + ", active=Window(start=date(2026, 11, 29), runs=10))"))
    result = ops.run("runs", "--team", ops.team.name, "--job", "report", "--since", "3h25m", "--json")
    assert result.exit_code == 0, result.stderr
    rows = {row["time"][11:16]: row for row in map(json.loads, result.stdout.splitlines())}
    assert [time for time, row in rows.items() if row["status"] == "missing"] == [
        f"{hour:02d}:{minute:02d}"
        for hour in (0, 1)
        for minute in range(0, 60, 10)
        if hour * 60 + minute <= 90
    ]
    assert {rows[time]["outcome"] for time in ("23:40", "23:50")} == {
        "no record: excluded by the job's calendar (before_window)"
    }
    after = [row for time, row in rows.items() if "01:40" <= time <= "03:00"]
    assert len(after) == 9
    assert {row["outcome"] for row in after} == {"no record: excluded by the job's calendar (after_window)"}
