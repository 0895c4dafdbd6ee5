"""A job's calendar in `runonce runs` (docs/stacks/schedules.md, "Calendars"), on real records: a tick
the calendar excludes is listed `excluded`, with why, whether its delivery was recorded or never
came, never `missing`; the ticks it does not exclude are listed as before."""

from __future__ import annotations

import json
import os
from pathlib import Path

from runonce.contract import EXCLUDED_BECAUSE_FIELD, RunStatus
from runonce.core.store import Refusal
from tests.conftest import SCHEDULED


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
