"""A skipped run (overlap `skip`, docs/schedules/overlap.md) in `runonce runs` and `runonce show`, on real
records in the emulator: listed with its status and the run it was skipped for, never hidden, and
offered its re-run; and the watchdog counts it finished, not missed."""

from __future__ import annotations

import json
from datetime import timedelta

from runonce.contract import Overlap
from runonce.core.store import Claim, JobLock, Overlapped
from runonce.scheduler.keys import job_lock
from runonce.scheduler.watchdog import judge
from tests.conftest import SCHEDULED


def _skipped(ops) -> tuple[str, str]:
    """The run at SCHEDULED - 10 min holds the job; the run at SCHEDULED is skipped for it."""
    job = ops.team.jobs[0]
    lock = JobLock(job_lock(ops.team.project, ops.team.region, job.scheduler_job), Overlap.SKIP)
    holder = ops.claim_scheduled(SCHEDULED - timedelta(minutes=10))
    held = ops.store.take_lock(holder, lock)
    assert isinstance(held, Claim)
    key = ops.scheduled_key(SCHEDULED)
    fields = {
        "job": job.scheduler_job,
        "schedule_time": "2026-11-29T03:00:00Z",
        "forced": False,
        "project": ops.team.project,
        "location": ops.team.region,
    }
    answer = ops.store.claim_locked(key, fields, lock)
    assert isinstance(answer, Overlapped) and answer.holder == holder.key
    return key, holder.key


def test_runs_lists_a_skipped_run_with_the_run_it_was_skipped_for(ops):
    key, holder = _skipped(ops)
    result = ops.run("runs", "--team", ops.team.name, "--job", "report", "--since", "15m", "--json")
    assert result.exit_code == 0, result.stderr
    rows = {row["key"]: row for row in map(json.loads, result.stdout.splitlines())}
    assert rows[key]["status"] == "skipped"
    assert rows[key]["outcome"].startswith(f"skipped: run {holder[:12]}")
    assert rows[holder]["status"] == "in_progress"


def test_show_of_a_skipped_run_offers_its_rerun_without_insisting(ops):
    key, holder = _skipped(ops)
    shown = json.loads(ops.run("show", key, "--team", ops.team.name).stdout)
    assert shown["record"]["status"] == "skipped"
    [step] = shown["next"]
    assert step["command"] == f"runonce rerun --team {ops.team.name} --job report --time 2026-11-29T03:00:00Z"
    assert holder in step["why"] and "never ran" in step["why"]


def test_the_watchdog_counts_a_skipped_run_finished_not_missed(ops):
    key, _ = _skipped(ops)
    assert judge(ops.store.read(key), SCHEDULED + timedelta(days=1), timedelta(minutes=30)) is None
