"""The operators' command knows the service and App Engine jobs (docs/stacks/services.md) as it
knows the function jobs: by team-file name or Scheduler job id, with their schedule and lease."""

from __future__ import annotations

from datetime import UTC, datetime

from emulator.googleapis import GoogleApisStandIn
from operate.rerun import SchedulerApi, Target, find_job
from operate.team import view
from runonce.scheduler.expected import scheduled_key
from runonce.scheduler.keys import rerun_slot
from stacks import naming
from tests.stacks.test_services import TEAM

T = datetime(2026, 11, 29, 5, 0, tzinfo=UTC)


def test_the_team_view_lists_service_and_app_engine_jobs_with_their_scheduler_ids():
    jobs = {job.name: job.scheduler_job for job in view(TEAM).jobs}
    names = [job.name for job in [*TEAM.service_jobs, *TEAM.app_engine_jobs]]
    assert jobs == {name: naming.scheduler_job_name(TEAM.name, name) for name in names}


def test_rerun_finds_a_service_job_with_its_services_timeout():
    job = find_job(TEAM, naming.scheduler_job_name(TEAM.name, "invoice"))
    assert (job.name, job.schedule, job.timeout_seconds) == ("invoice", "0 3 * * *", 900)


def test_rerun_finds_an_app_engine_job_by_its_team_file_name():
    assert find_job(TEAM, "archive").timeout_seconds == 3600


def test_an_app_engine_jobs_runs_are_keyed_and_addressed_in_the_applications_region():
    # TEAM's App Engine application is in europe-west2, its services in europe-west1.
    archive, close = Target.of(TEAM, find_job(TEAM, "archive")), Target.of(TEAM, find_job(TEAM, "close"))
    assert (archive.location, close.location) == ("europe-west2", "europe-west1")
    assert archive.run_key(T) == scheduled_key("acme-archive", T, "acme-prod-1", "europe-west2")
    assert archive.slot == rerun_slot("acme-prod-1", "europe-west2", "acme-archive")
    jobs = {job.name: job.location for job in view(TEAM).jobs}
    assert (jobs["archive"], jobs["sweep"], jobs["close"]) == ("europe-west2", "europe-west2", "europe-west1")


def test_rerun_and_backfill_run_an_app_engine_job_where_it_is():
    api = GoogleApisStandIn().start()
    try:
        SchedulerApi(api.url).run(Target.of(TEAM, find_job(TEAM, "archive")))
        assert [call.path for call in api.starts()] == [
            "/v1/projects/acme-prod-1/locations/europe-west2/jobs/acme-archive:run"
        ]
    finally:
        api.stop()
