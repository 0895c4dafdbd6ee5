"""`runonce resume` (operate/resume.py): resumes a Scheduler job the watchdog paused
(`jobs.resume` on the Google APIs stand-in) and records who and why in the team's ledger; refuses
a job that is not paused, and says so when Scheduler refuses. On the Firestore emulator and on
Valkey."""

from __future__ import annotations

import pytest

from emulator.googleapis import Fault
from operate.resume import RESUMED_PREFIX
from runonce.core.store import StoredResult
from tests.operate.conftest import ON_BOTH_STORES


@pytest.fixture(params=ON_BOTH_STORES)
def ledger_kind(request) -> str:
    return request.param


def job_name(served) -> str:
    job = served.ops.team.job("report")
    return f"projects/{served.ops.team.project}/locations/{served.ops.team.region}/jobs/{job.scheduler_job}"


def paused(served, since: str = "2026-11-29T00:41:00Z") -> None:
    name = job_name(served)
    [job] = [job for job in served.api.resources("jobs") if job["name"] == name]
    served.api._store({**job, "state": "PAUSED", "userUpdateTime": since})


def resumes(served) -> list[str]:
    return [call.path for call in served.api.calls if call.path.endswith(":resume")]


def test_resume_resumes_the_paused_job_once_and_records_who_and_why(served, clock):
    paused(served)
    answer = served.ops.run(
        "resume",
        "--team",
        served.ops.team.name,
        "--job",
        "report",
        "--by",
        "alice",
        "--why",
        "credential rotated",
    )
    assert answer.exit_code == 0, answer.output
    assert resumes(served) == [f"/v1/{job_name(served)}:resume"]
    [job] = [job for job in served.api.resources("jobs") if job["name"] == job_name(served)]
    assert job["state"] == "ENABLED"
    [key] = [word for word in answer.stdout.split() if word.startswith(RESUMED_PREFIX)]
    kept = StoredResult.from_record(dict(served.ops.store.read(key))).value
    assert (kept["by"], kept["why"], kept["paused_since"]) == (
        "alice",
        "credential rotated",
        "2026-11-29T00:41:00Z",
    )
    assert "paused since 2026-11-29T00:41:00Z" in answer.stdout


def test_a_job_that_is_not_paused_is_refused_with_exit_2_and_nothing_changed(served, clock):
    answer = served.ops.run("resume", "--team", served.ops.team.name, "--job", "report", "--by", "alice")
    assert answer.exit_code == 2
    assert "not PAUSED" in answer.stderr and "nothing changed" in answer.stderr
    assert resumes(served) == []


def test_a_resume_scheduler_refuses_exits_1_saying_the_job_stays_paused(served, clock):
    paused(served)
    served.api.inject(Fault("fail", "POST", ":resume", status=403))
    answer = served.ops.run("resume", "--team", served.ops.team.name, "--job", "report", "--by", "alice")
    assert answer.exit_code == 1
    assert "403" in answer.stderr and "the job stays paused" in answer.stderr
