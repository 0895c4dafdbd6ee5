"""The watchdog's catch-up (docs/schedules/backfill.md): a missed run within its job's catch-up window is
started once through the job's re-run slot and Scheduler's `jobs.run`; outside it, or when that
fails, the run is reported as before, once.

On both stores (the Firestore emulator and the in-memory store). Scheduler is a stand-in whose
`jobs.run` has the forced delivery taken by the library's own store call (`Store.take_rerun`), as
the served job takes it (tests/watchdog/test_catch_up_function.py serves both for real).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta

import pytest

from runonce.contract import MissedRun
from runonce.core.errors import ConfigError
from runonce.core.store import CAUSE_BY_FIELD, CAUSE_FIELD, REQUEST_STATE_FIELD, Claim, StoredResult
from runonce.scheduler.expected import forced_key, next_time, scheduled_key
from runonce.scheduler.keys import rerun_slot
from runonce.scheduler.watchdog import CATCH_UP_PREFIX, Watch, check, parse_jobs
from tests.watchdog.conftest import watchdog_lines
from tests.watchdog.test_check import GRACE, LOCATION, PROJECT, SYNC, TEAM, at, claim, completed, key

WINDOW = timedelta(minutes=45)
CATCHING = replace(SYNC, catch_up=WINDOW)
"""The every-ten-minutes job, with a 45-minute catch-up window (its grace is 20 minutes)."""
SLOT = rerun_slot(PROJECT, LOCATION, SYNC.scheduler_job)
JOB_NAME = f"projects/{PROJECT}/locations/{LOCATION}/jobs/{SYNC.scheduler_job}"


@dataclass
class Scheduler:
    """Cloud Scheduler's `jobs.get` and `jobs.run`: a run has its forced delivery taken at once
    (unless `deliver` is off), its run then ending as `ending` says."""

    stores: object
    clock: object
    runs: list[str] = field(default_factory=list)
    refuse: bool = False
    deliver: bool = True
    ending: str = "complete"

    lose_answer: bool = False

    def run(self, job: str) -> None:
        self.runs.append(job)
        if self.refuse:
            raise RuntimeError("403 PERMISSION_DENIED: cloudscheduler.jobs.run")
        if not self.deliver:
            return
        self._deliver()
        if self.lose_answer:
            raise TimeoutError("the answer of jobs.run was lost")

    def _deliver(self) -> None:
        now = self.clock()
        upcoming = next_time(SYNC.schedule, SYNC.time_zone, now)
        forced = forced_key(SYNC.scheduler_job, upcoming, PROJECT, LOCATION)
        fields = {"job": SYNC.scheduler_job, "schedule_time": upcoming.isoformat(), "forced": True}
        rerun = self.stores.ledger.take_rerun(SLOT, forced, fields)
        assert rerun is not None and rerun.claim is not None, rerun
        if self.ending == "complete":
            assert self.stores.ledger.complete(rerun.claim, StoredResult.of({"caught": True})) is not None


@pytest.fixture
def scheduler(stores, clock) -> Scheduler:
    return Scheduler(stores, clock)


def tick(stores, clock, scheduler, when: datetime, capsys, job=CATCHING) -> tuple[dict, list[dict]]:
    clock.current = when
    summary = check(Watch(TEAM, PROJECT, LOCATION, (job,)), stores.ledger, stores.claims, scheduler=scheduler)
    return summary, watchdog_lines(capsys.readouterr().out)


def test_a_missed_run_within_the_window_is_started_once_and_a_second_tick_does_nothing(
    stores, clock, scheduler, capsys
):
    completed(stores.ledger, key(at(0)), clock, at(0))
    summary, lines = tick(stores, clock, scheduler, at(31), capsys)  # 00:10 is past its grace, missed
    assert summary == {"jobs": 1, "missed": 1, "reported": 0, "caught_up": 1}
    assert scheduler.runs == [JOB_NAME]
    [line] = lines
    assert (line["severity"], line["catch_up"], line["caught_up"]) == (
        "WARNING",
        "started",
        "never_delivered",
    )
    assert "missed_run" not in line  # the missed-run metric does not count it
    record = stores.ledger.read(key(at(10)))
    assert (record["status"], record[CAUSE_FIELD], record[CAUSE_BY_FIELD]) == (
        "completed",
        "catch_up",
        "runonce-watchdog",
    )
    again, lines = tick(stores, clock, scheduler, at(41), capsys)
    assert again == {"jobs": 1, "missed": 1, "reported": 0, "caught_up": 1}  # 00:20 now; 00:10 done
    assert (
        scheduler.runs == [JOB_NAME, JOB_NAME] and stores.ledger.read(key(at(20)))[CAUSE_FIELD] == "catch_up"
    )
    third, lines = tick(stores, clock, scheduler, at(41.5), capsys)
    assert third == {"jobs": 1, "missed": 0, "reported": 0, "caught_up": 0} and lines == []
    assert len(scheduler.runs) == 2


def test_a_job_in_a_region_of_its_own_is_caught_up_there(stores, clock, scheduler, capsys):
    london = replace(CATCHING, location="europe-west2")
    scheduler.deliver = False
    summary, _ = tick(stores, clock, scheduler, at(31), capsys, job=london)
    assert summary["caught_up"] == 1
    assert scheduler.runs == [f"projects/{PROJECT}/locations/europe-west2/jobs/{SYNC.scheduler_job}"]
    request = stores.ledger.read(rerun_slot(PROJECT, "europe-west2", SYNC.scheduler_job))
    assert request["rerun_key"] == scheduled_key(SYNC.scheduler_job, at(0), PROJECT, "europe-west2")
    assert stores.ledger.read(SLOT) is None


def test_a_retried_out_run_is_caught_up_under_its_key(stores, clock, scheduler, capsys):
    completed(stores.ledger, key(at(0)), clock, at(0))
    dead = claim(stores.ledger, key(at(10)), clock, at(10))
    summary, _ = tick(stores, clock, scheduler, at(31), capsys)
    assert summary["caught_up"] == 1 and summary["reported"] == 0
    record = stores.ledger.read(key(at(10)))
    assert (record["status"], record["attempts"]) == ("completed", 2)
    assert not stores.ledger.fail(dead, "the dead attempt wakes")


def test_outside_the_window_a_missed_run_is_reported_only(stores, clock, scheduler, capsys):
    summary, lines = tick(stores, clock, scheduler, at(31), capsys, job=replace(SYNC, catch_up=timedelta(0)))
    assert summary == {"jobs": 1, "missed": 2, "reported": 2, "caught_up": 0}
    assert scheduler.runs == []
    assert {line["missed_run"] for line in lines} == {"never_delivered"}
    late = replace(CATCHING, catch_up=timedelta(minutes=25))
    clock.current = at(40)
    summary, lines = tick(stores, clock, scheduler, at(40), capsys, job=late)
    assert scheduler.runs == [JOB_NAME]  # 00:20 only: 00:00 and 00:10 are older than 25 minutes
    assert stores.ledger.read(key(at(0))) is None and stores.ledger.read(key(at(10))) is None


def test_a_catch_up_scheduler_refuses_is_reported_once_and_never_tried_again(
    stores, clock, scheduler, capsys
):
    completed(stores.ledger, key(at(0)), clock, at(0))
    scheduler.refuse = True
    summary, lines = tick(stores, clock, scheduler, at(31), capsys)
    assert summary == {"jobs": 1, "missed": 1, "reported": 1, "caught_up": 0}
    [line] = lines
    assert (line["severity"], line["missed_run"], line["catch_up"]) == ("ERROR", "never_delivered", "failed")
    assert "PERMISSION_DENIED" in line["catch_up_error"]
    assert stores.ledger.read(SLOT)[REQUEST_STATE_FIELD] == "withdrawn"
    scheduler.refuse = False
    summary, lines = tick(stores, clock, scheduler, at(31.5), capsys)
    assert summary == {"jobs": 1, "missed": 1, "reported": 0, "caught_up": 0} and lines == []
    assert scheduler.runs == [JOB_NAME]
    assert stores.claims.read(CATCH_UP_PREFIX + key(at(10)))["status"] == "completed"


def test_a_started_catch_up_whose_delivery_never_comes_is_reported_after_its_request_and_grace(
    stores, clock, scheduler, capsys
):
    completed(stores.ledger, key(at(0)), clock, at(0))
    scheduler.deliver = False
    summary, lines = tick(stores, clock, scheduler, at(31), capsys)
    assert summary["caught_up"] == 1 and summary["reported"] == 0
    completed(stores.ledger, key(at(20)), clock, at(20))
    summary, lines = tick(stores, clock, scheduler, at(41), capsys)  # within 10 min + grace
    assert summary["reported"] == 0 and lines == []
    summary, lines = tick(stores, clock, scheduler, at(62), capsys)
    [line] = [line for line in lines if line["schedule_time"].endswith("00:10:00Z")]
    assert (line["missed_run"], line["catch_up"]) == ("never_delivered", "not_delivered")
    assert stores.ledger.read(key(at(10))) is None  # never tried again


def test_a_caught_up_run_that_dies_is_reported_and_not_caught_up_again(stores, clock, scheduler, capsys):
    completed(stores.ledger, key(at(0)), clock, at(0))
    scheduler.ending = "die"  # its attempt holds the run and dies
    assert tick(stores, clock, scheduler, at(31), capsys)[0]["caught_up"] == 1
    completed(stores.ledger, key(at(20)), clock, at(20))
    completed(stores.ledger, key(at(30)), clock, at(30))
    _, lines = tick(stores, clock, scheduler, at(31) + GRACE + timedelta(minutes=7), capsys)
    assert [line["missed_run"] for line in lines] == [MissedRun.RETRIED_OUT.value]
    assert scheduler.runs == [JOB_NAME]


def test_a_tick_starts_one_catch_up_per_job_and_the_next_tick_the_next(stores, clock, scheduler, capsys):
    summary, _ = tick(stores, clock, scheduler, at(31), capsys)  # 00:00 and 00:10 missed
    assert summary == {"jobs": 1, "missed": 2, "reported": 0, "caught_up": 1}
    assert stores.ledger.read(key(at(0)))[CAUSE_FIELD] == "catch_up"
    assert stores.ledger.read(key(at(10))) is None
    summary, _ = tick(stores, clock, scheduler, at(32), capsys)
    assert summary["caught_up"] == 1 and stores.ledger.read(key(at(10)))[CAUSE_FIELD] == "catch_up"


def test_catch_up_seconds_is_read_from_the_jobs_json_and_defaults_to_zero():
    entry = {
        "job": "sync",
        "scheduler_job": "orders-sync",
        "schedule": "*/10 * * * *",
        "time_zone": "Etc/UTC",
        "grace_seconds": 1200,
        "lookback_seconds": 7200,
        "since": "2026-11-28T23:59:00Z",
    }
    import json

    [plain] = parse_jobs(json.dumps([entry]), "RUNONCE_WATCHDOG_JOBS")
    [catching] = parse_jobs(json.dumps([{**entry, "catch_up_seconds": 2700}]), "RUNONCE_WATCHDOG_JOBS")
    assert (plain.catch_up, catching.catch_up) == (timedelta(0), WINDOW)
    with pytest.raises(ConfigError, match="catch_up_seconds must be a whole number"):
        parse_jobs(json.dumps([{**entry, "catch_up_seconds": -1}]), "RUNONCE_WATCHDOG_JOBS")


def test_a_claim_in_the_team_ledger_is_what_the_catch_up_writes(stores, clock, scheduler, capsys):
    completed(stores.ledger, key(at(0)), clock, at(0))
    tick(stores, clock, scheduler, at(31), capsys)
    slot = stores.ledger.read(SLOT)
    assert (slot[REQUEST_STATE_FIELD], slot[CAUSE_FIELD], slot["requested_by"]) == (
        "consumed",
        "catch_up",
        "runonce-watchdog",
    )
    assert isinstance(stores.ledger.claim(key(at(10)), {"job": SYNC.scheduler_job}), Claim) is False


def test_a_caught_up_run_still_running_past_its_own_grace_is_not_reported(stores, clock, scheduler, capsys):
    completed(stores.ledger, key(at(0)), clock, at(0))
    scheduler.ending = "hold"  # its attempt is still running at the next tick
    assert tick(stores, clock, scheduler, at(31), capsys)[0]["caught_up"] == 1
    summary, lines = tick(stores, clock, scheduler, at(35), capsys)
    assert summary == {"jobs": 1, "missed": 0, "reported": 0, "caught_up": 0} and lines == []
    assert stores.ledger.read(key(at(10)))["status"] == "in_progress"


def test_a_catch_up_whose_jobs_run_answer_is_lost_after_its_delivery_counts_as_started(
    stores, clock, scheduler, capsys
):
    completed(stores.ledger, key(at(0)), clock, at(0))
    scheduler.lose_answer = True
    summary, [line] = tick(stores, clock, scheduler, at(31), capsys)
    assert summary == {"jobs": 1, "missed": 1, "reported": 0, "caught_up": 1}
    assert line["catch_up"] == "started" and "missed_run" not in line
    assert stores.ledger.read(key(at(10)))[CAUSE_FIELD] == "catch_up"
