"""The watchdog pauses a job that keeps failing (docs/watchdog.md): after `pause_after_failures`
consecutive failed runs (a permanent failure, or retried out) it calls Scheduler's `jobs.pause`
once however many ticks run, records who paused it and why, logs one ERROR line, and does not
report the ticks of a paused job as missed; the failures before a pause never count again.

On the in-memory stores, the Firestore emulator and a Valkey server. Scheduler is a stand-in that
keeps the job's state as `jobs.pause`, `jobs.resume` and `jobs.get` would.
"""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass, field, replace
from datetime import datetime

import pytest

from runonce.core.errors import ConfigError
from runonce.core.store import StoredResult
from runonce.scheduler.watchdog import PAUSE_PREFIX, PAUSED_FIELD, PAUSED_MESSAGE, Watch, check, parse_jobs
from tests.watchdog.conftest import watchdog_lines
from tests.watchdog.test_check import LOCATION, PROJECT, SYNC, TEAM, at, claim, completed, key

FAILING = replace(SYNC, pause_after_failures=3)
"""The every-ten-minutes job (grace 20 minutes), paused after 3 failed runs in a row."""
JOB_NAME = f"projects/{PROJECT}/locations/{LOCATION}/jobs/{SYNC.scheduler_job}"


@dataclass
class Scheduler:
    """Cloud Scheduler's `jobs.pause`, `jobs.resume` and `jobs.get` for one job."""

    clock: object
    pauses: list[str] = field(default_factory=list)
    paused_at: datetime | None = None
    refuse: bool = False

    def run(self, job: str) -> None:
        raise AssertionError(f"no catch-up is expected: jobs.run {job}")

    def pause(self, job: str) -> None:
        assert job == JOB_NAME
        if self.refuse:
            raise RuntimeError("403 PERMISSION_DENIED: cloudscheduler.jobs.pause")
        self.pauses.append(job)
        self.paused_at = self.clock()

    def resume(self) -> None:
        self.paused_at = None

    def paused_since(self, job: str) -> datetime | None:
        assert job == JOB_NAME
        return self.paused_at


@pytest.fixture
def scheduler(clock) -> Scheduler:
    return Scheduler(clock)


def failed(stores, clock, minute: float) -> None:
    """The run scheduled at `minute` ends in a permanent failure."""
    run = claim(stores.ledger, key(at(minute)), clock, at(minute))
    assert stores.ledger.fail(run, "PermanentError: the credential was revoked")


def tick(stores, clock, scheduler, when: datetime, capsys) -> tuple[dict, list[dict]]:
    clock.current = when
    summary = check(
        Watch(TEAM, PROJECT, LOCATION, (FAILING,)), stores.ledger, stores.claims, scheduler=scheduler
    )
    return summary, watchdog_lines(capsys.readouterr().out)


def paused_lines(lines: list[dict]) -> list[dict]:
    return [line for line in lines if PAUSED_FIELD in line]


def test_three_failed_runs_in_a_row_pause_the_job_once_with_who_and_why(stores, clock, scheduler, capsys):
    for minute in (0, 10, 20):
        failed(stores, clock, minute)
    summary, lines = tick(stores, clock, scheduler, at(41), capsys)
    assert scheduler.pauses == [JOB_NAME]
    assert summary["paused"] == 1
    [line] = paused_lines(lines)
    assert line["severity"] == "ERROR" and line["message"] == PAUSED_MESSAGE
    assert line[PAUSED_FIELD] == "3" and line["paused_by"] == "runonce-watchdog"
    assert line["failed_runs"] == ",".join(key(at(m)) for m in (0, 10, 20))
    assert (line["first_failed_time"], line["last_failed_time"]) == (
        "2026-11-29T00:00:00Z",
        "2026-11-29T00:20:00Z",
    )
    assert line["command"] == f"runonce resume --team {TEAM} --job sync"
    record = stores.claims.read(PAUSE_PREFIX + key(at(20)))
    kept = StoredResult.from_record(dict(record)).value
    assert kept["failed_runs"] == line["failed_runs"] and kept["at"] == at(41).isoformat()
    summary, lines = tick(stores, clock, scheduler, at(42), capsys)
    assert scheduler.pauses == [JOB_NAME] and paused_lines(lines) == [] and summary["paused"] == 0


def test_two_failed_runs_do_not_pause_it(stores, clock, scheduler, capsys):
    for minute in (0, 10):
        failed(stores, clock, minute)
    completed(stores.ledger, key(at(20)), clock, at(20))
    summary, lines = tick(stores, clock, scheduler, at(41), capsys)
    assert scheduler.pauses == [] and paused_lines(lines) == [] and summary["paused"] == 0


def test_a_completed_run_between_failures_breaks_the_streak(stores, clock, scheduler, capsys):
    failed(stores, clock, 0)
    failed(stores, clock, 10)
    completed(stores.ledger, key(at(20)), clock, at(20))
    failed(stores, clock, 30)
    failed(stores, clock, 40)
    tick(stores, clock, scheduler, at(61), capsys)
    assert scheduler.pauses == []
    failed(stores, clock, 50)
    tick(stores, clock, scheduler, at(71), capsys)
    assert scheduler.pauses == [JOB_NAME]


def test_runs_retried_out_count_as_failed(stores, clock, scheduler, capsys):
    for minute in (0, 10, 20):
        claim(stores.ledger, key(at(minute)), clock, at(minute))  # left in progress; its lease runs out
    _, lines = tick(stores, clock, scheduler, at(41), capsys)
    assert scheduler.pauses == [JOB_NAME]
    assert len(paused_lines(lines)) == 1


def test_concurrent_ticks_pause_the_job_exactly_once(stores, clock, scheduler, capsys):
    for minute in (0, 10, 20):
        failed(stores, clock, minute)
    clock.current = at(41)
    watch = Watch(TEAM, PROJECT, LOCATION, (FAILING,))
    summaries: list[dict] = []
    ticks = [
        threading.Thread(
            target=lambda: summaries.append(check(watch, stores.ledger, stores.claims, scheduler=scheduler))
        )
        for _ in range(6)
    ]
    for thread in ticks:
        thread.start()
    for thread in ticks:
        thread.join()
    assert scheduler.pauses == [JOB_NAME]
    assert sum(summary["paused"] for summary in summaries) == 1
    assert len(paused_lines(watchdog_lines(capsys.readouterr().out))) == 1


def test_a_paused_jobs_ticks_are_not_reported_missed_and_its_failures_do_not_pause_it_again_after_resume(
    stores, clock, scheduler, capsys
):
    for minute in (0, 10, 20, 30, 40):  # 00:30 and 00:40 fail too, before the pause at 00:41
        failed(stores, clock, minute)
    tick(stores, clock, scheduler, at(41), capsys)
    assert scheduler.pauses == [JOB_NAME]
    summary, lines = tick(stores, clock, scheduler, at(101), capsys)  # 00:50 .. 01:20 never delivered
    assert lines == [] and summary["missed"] == 0
    scheduler.resume()
    clock.current = at(105)
    failed(stores, clock, 90)
    failed(stores, clock, 100)
    tick(stores, clock, scheduler, at(121), capsys)
    assert scheduler.pauses == [JOB_NAME]  # 00:30 and 00:40 failed before the pause: never counted again
    failed(stores, clock, 110)
    _, lines = tick(stores, clock, scheduler, at(131), capsys)
    assert scheduler.pauses == [JOB_NAME, JOB_NAME]
    [line] = paused_lines(lines)
    assert line["failed_runs"] == ",".join(key(at(m)) for m in (90, 100, 110))


def test_a_refused_pause_is_logged_and_tried_again_by_the_next_tick(stores, clock, scheduler, capsys):
    for minute in (0, 10, 20):
        failed(stores, clock, minute)
    scheduler.refuse = True
    _, lines = tick(stores, clock, scheduler, at(41), capsys)
    assert paused_lines(lines) == []
    assert [line["severity"] for line in lines] == ["WARNING"]
    assert "jobs.pause" in lines[0]["message"] and "PERMISSION_DENIED" in lines[0]["message"]
    scheduler.refuse = False
    _, lines = tick(stores, clock, scheduler, at(42), capsys)
    assert scheduler.pauses == [JOB_NAME] and len(paused_lines(lines)) == 1


def test_a_job_without_the_setting_is_never_paused(stores, clock, scheduler, capsys):
    for minute in range(0, 100, 10):
        failed(stores, clock, minute)
    clock.current = at(121)
    summary = check(
        Watch(TEAM, PROJECT, LOCATION, (SYNC,)), stores.ledger, stores.claims, scheduler=scheduler
    )
    assert scheduler.pauses == [] and "paused" not in summary


@pytest.mark.parametrize("value", [-1, "3", True, 2.5])
def test_pause_after_failures_must_be_a_whole_number(value):
    entry = (
        '[{"job": "sync", "scheduler_job": "orders-sync", "schedule": "*/10 * * * *", "time_zone": "UTC",'
        ' "grace_seconds": 60, "lookback_seconds": 600, "since": "2026-11-29T00:00:00Z",'
        f' "pause_after_failures": {json.dumps(value)}}}]'
    )
    with pytest.raises(ConfigError, match=r"\(job 'sync'\): pause_after_failures must be a whole number"):
        parse_jobs(entry, "RUNONCE_WATCHDOG_JOBS")


def test_pause_after_failures_is_read_from_the_jobs_json():
    entry = (
        '[{"job": "sync", "scheduler_job": "orders-sync", "schedule": "*/10 * * * *", "time_zone": "UTC",'
        ' "grace_seconds": 60, "lookback_seconds": 600, "since": "2026-11-29T00:00:00Z",'
        ' "pause_after_failures": 4}]'
    )
    [job] = parse_jobs(entry, "RUNONCE_WATCHDOG_JOBS")
    assert job.pause_after_failures == 4
