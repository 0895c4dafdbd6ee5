"""The operators' command knows the service and App Engine jobs (docs/stacks/services.md) as it
knows the function jobs: by team-file name or Scheduler job id, with their schedule and lease."""

from __future__ import annotations

from operate.rerun import find_job
from operate.team import view
from stacks import naming
from tests.stacks.test_services import TEAM


def test_the_team_view_lists_service_and_app_engine_jobs_with_their_scheduler_ids():
    jobs = {job.name: job.scheduler_job for job in view(TEAM).jobs}
    names = [job.name for job in [*TEAM.service_jobs, *TEAM.app_engine_jobs]]
    assert jobs == {name: naming.scheduler_job_name(TEAM.name, name) for name in names}


def test_rerun_finds_a_service_job_with_its_services_timeout():
    job = find_job(TEAM, naming.scheduler_job_name(TEAM.name, "invoice"))
    assert (job.name, job.schedule, job.timeout_seconds) == ("invoice", "0 3 * * *", 900)


def test_rerun_finds_an_app_engine_job_by_its_team_file_name():
    assert find_job(TEAM, "archive").timeout_seconds == 3600
