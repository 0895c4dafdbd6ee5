"""Jobs on services the team runs: Cloud Run services (deployed or existing) and App Engine. What a
team file may say about them (validation), and what the stack builds (docs/stacks/services.md)."""

from __future__ import annotations

import json
import re
from dataclasses import replace

import pytest
from cdktf import Testing

from runonce.scheduler.watchdog import Watch, parse_jobs
from stacks.config.team_files import read_team_file
from stacks.constructs.run_service import USER_MANAGED_ACCOUNT
from stacks.team import AppEngineJob, Retry, Service, ServiceJob, Team
from stacks.validate import find_problems
from stacks.validate.quotas import usage
from tests.stacks.conftest import synthesize

IMAGE = "europe-west1-docker.pkg.dev/acme-prod-1/jobs/closer:1.4.2"
DEPLOYED = Service(name="closer", image=IMAGE, timeout_seconds=300, concurrency=10, max_instances=2)
EXISTING = Service(name="billing-api", timeout_seconds=900)
TEAM = Team(
    name="acme",
    project="acme-prod-1",
    region="europe-west1",
    jobs=[],
    alert_emails=["oncall@example.com"],
    services=[DEPLOYED, EXISTING],
    service_jobs=[
        ServiceJob(name="close", schedule="0 1 * * *", service="closer", path="/jobs/close"),
        ServiceJob(name="reopen", schedule="0 2 * * *", service="closer", path="/jobs/reopen"),
        ServiceJob(
            name="invoice",
            schedule="0 3 * * *",
            service="billing-api",
            path="/jobs/invoice",
            # The 900 s timeout's lease (960 s) ends before the last retry (1860 s).
            retry=Retry(min_backoff_seconds=60, max_backoff_seconds=1800, max_doublings=5),
        ),
    ],
    app_engine_jobs=[
        AppEngineJob(name="sweep", schedule="0 4 * * *", relative_uri="/jobs/sweep", service="worker"),
        AppEngineJob(
            name="archive",
            schedule="0 5 * * *",
            relative_uri="/jobs/archive",
            version="v7",
            scaling="basic",
            timeout_seconds=3600,
            attempt_deadline_seconds=3600,
            retry=Retry(min_backoff_seconds=300, max_backoff_seconds=3600, max_doublings=5),
            service_account="worker-run@acme-prod-1.iam.gserviceaccount.com",
        ),
    ],
    # The application is in London, the team's functions and services in Belgium.
    app_engine_location="europe-west2",
)


@pytest.fixture(scope="module")
def stack(archive_dir):
    return synthesize(TEAM, archive_dir)


def problems(team: Team) -> list[tuple[str | None, str]]:
    return [(problem.job, problem.field) for problem in find_problems([team])]


def resource(stack, kind: str, fragment: str) -> dict:
    (found,) = [value for key, value in stack.resources(kind).items() if key.startswith(fragment)]
    return found


def data(stack, kind: str, name: str) -> dict:
    return stack.document["data"][kind][name]


# --- validation ---


def test_a_team_with_service_and_app_engine_jobs_only_is_valid():
    assert find_problems([TEAM]) == []


def test_a_job_naming_an_unknown_service_gets_the_closest_name():
    job = replace(TEAM.service_jobs[0], service="closr")
    (problem,) = find_problems([replace(TEAM, service_jobs=[job, *TEAM.service_jobs[1:]])])
    assert (problem.job, problem.field) == ("close", "service")
    assert "write service='closer'" in str(problem)


def test_a_path_must_start_with_a_slash():
    job = replace(TEAM.service_jobs[0], path="jobs/close")
    assert problems(replace(TEAM, service_jobs=[job, *TEAM.service_jobs[1:]])) == [("close", "path")]


def test_deployed_only_settings_on_an_existing_service_are_reported():
    team = replace(TEAM, services=[DEPLOYED, replace(EXISTING, concurrency=5)])
    assert problems(team) == [(None, "services[billing-api].concurrency")]


def test_a_service_no_job_calls_is_reported():
    team = replace(TEAM, services=[*TEAM.services, Service(name="idle", image=IMAGE)])
    assert problems(team) == [(None, "services[idle].name")]


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"image": "closer:latest"}, "image"),
        ({"image": f"{IMAGE} "}, "image"),
        ({"concurrency": 0}, "concurrency"),
        ({"min_instances": 3, "max_instances": 2}, "min_instances"),
        ({"memory": "512MB"}, "memory"),
        ({"cpu": "3"}, "cpu"),
        ({"env": {"RUNONCE_LEASE_SECONDS": "900"}}, "env"),
        ({"env": {"PORT": "9000"}}, "env"),
    ],
)
def test_a_deployed_service_stays_within_cloud_runs_limits(change, field):
    team = replace(TEAM, services=[replace(DEPLOYED, **change), EXISTING])
    assert problems(team) == [(None, f"services[closer].{field}")]


def test_a_service_timeout_beyond_an_hour_is_the_services_field():
    team = replace(TEAM, services=[replace(DEPLOYED, timeout_seconds=3601), EXISTING])
    assert (None, "services[closer].timeout_seconds") in problems(team)


def test_an_attempt_deadline_longer_than_the_service_timeout_names_the_services_timeout():
    job = replace(TEAM.service_jobs[2], attempt_deadline_seconds=1000)
    team = replace(TEAM, service_jobs=[*TEAM.service_jobs[:2], job])
    assert problems(team) == [("invoice", "attempt_deadline_seconds")]


def test_a_service_job_attempt_deadline_stays_within_http_targets_range():
    job = replace(TEAM.service_jobs[2], attempt_deadline_seconds=1801)
    team = replace(TEAM, service_jobs=[*TEAM.service_jobs[:2], job])
    assert ("invoice", "attempt_deadline_seconds") in problems(team)


def test_an_app_engine_timeout_beyond_automatic_scalings_ten_minutes_is_refused():
    job = replace(TEAM.app_engine_jobs[0], timeout_seconds=601)
    (problem,) = find_problems([replace(TEAM, app_engine_jobs=[job, TEAM.app_engine_jobs[1]])])
    assert (problem.job, problem.field) == ("sweep", "timeout_seconds")
    assert "basic or manual scaling" in problem.fix


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"relative_uri": "jobs/sweep"}, "relative_uri"),
        ({"service": "Worker"}, "service"),
        ({"version": "v_7"}, "version"),
        ({"scaling": "auto"}, "scaling"),
        ({"service_account": "worker-run"}, "service_account"),
    ],
)
def test_app_engine_routing_and_accounts_are_checked(change, field):
    job = replace(TEAM.app_engine_jobs[0], **change)
    team = replace(TEAM, app_engine_jobs=[job, TEAM.app_engine_jobs[1]])
    assert problems(team) == [("sweep", field)]


def test_an_app_engine_attempt_deadline_may_reach_a_day_but_not_more():
    job = replace(TEAM.app_engine_jobs[1], timeout_seconds=86400, attempt_deadline_seconds=86401)
    team = replace(TEAM, app_engine_jobs=[TEAM.app_engine_jobs[0], job])
    assert ("archive", "attempt_deadline_seconds") in problems(team)


def test_a_service_named_like_a_function_job_is_refused():
    from stacks.team import Job

    team = replace(TEAM, jobs=[Job(name="closer", schedule="0 6 * * *", source="report")])
    assert (None, "services") in problems(team)


def test_job_names_are_unique_across_every_kind_of_job():
    job = replace(TEAM.app_engine_jobs[0], name="close")
    team = replace(TEAM, app_engine_jobs=[job, TEAM.app_engine_jobs[1]])
    assert ("close", "name") in problems(team)


def test_two_teams_deploying_one_service_name_in_one_region_collide():
    other = replace(
        TEAM, name="acme-two", services=[DEPLOYED], service_jobs=[TEAM.service_jobs[0]], app_engine_jobs=[]
    )
    found = [(problem.team, problem.field) for problem in find_problems([TEAM, other])]
    assert ("acme-two", "name") in found
    assert "Cloud Run service 'closer'" in str(find_problems([TEAM, other])[0])


def test_a_service_or_app_engine_job_may_not_be_called_watchdog():
    job = replace(TEAM.app_engine_jobs[0], name="watchdog")
    assert ("watchdog", "name") in problems(replace(TEAM, app_engine_jobs=[job, TEAM.app_engine_jobs[1]]))


def test_a_misspelt_service_job_field_is_reported_with_its_line(tmp_path):
    path = tmp_path / "acme.py"
    path.write_text(
        "from stacks.team import Service, ServiceJob, Team\n"
        'team = Team(name="acme", project="acme-prod-1", region="europe-west1", jobs=[],\n'
        '    services=[Service(name="api")],\n'
        '    service_jobs=[ServiceJob(name="close", schedule="0 1 * * *", service="api",\n'
        '        pth="/jobs/close")])\n'
    )
    _, found = read_team_file(path)
    assert [(problem.job, problem.field, problem.line) for problem in found] == [("close", "pth", 5)]


def test_a_service_job_list_holding_another_kind_is_reported(tmp_path):
    path = tmp_path / "acme.py"
    path.write_text(
        "from stacks.team import Service, Team\n"
        'team = Team(name="acme", project="acme-prod-1", region="europe-west1", jobs=[],\n'
        '    service_jobs=[Service(name="api")])\n'
    )
    _, found = read_team_file(path)
    assert [(problem.field, problem.fix) for problem in found] == [
        ("service_jobs[0]", "write ServiceJob(name=..., schedule=..., service=..., path=...)")
    ]


def test_deployed_services_and_every_scheduler_job_count_against_the_quotas():
    counts = usage(TEAM)
    # build + invoker + the deployed service's account + the watchdog's; no function of the team's own
    assert counts["service_accounts"] == 4
    assert counts["cloud_run_services"] == 2  # the deployed service and the watchdog's function
    assert counts["scheduler_jobs"] == 6  # three service jobs, two App Engine jobs, the watchdog


# --- the deployed service ---


def test_the_deployed_service_is_internal_and_runs_as_its_own_account(stack):
    service = resource(stack, "google_cloud_run_v2_service", "closer-service")
    assert service["ingress"] == "INGRESS_TRAFFIC_INTERNAL_ONLY"
    assert service["deletion_protection"] is False
    template = service["template"]
    assert (
        template["service_account"]
        == "${google_service_account.closer-service-identity-runtime-account.email}"
    )
    assert template["timeout"] == "300s"
    assert template["max_instance_request_concurrency"] == 10
    assert template["scaling"] == {"min_instance_count": 0, "max_instance_count": 2}
    (container,) = template["containers"]
    assert container["image"] == IMAGE
    env = {item["name"]: item["value"] for item in container["env"]}
    assert env["RUNONCE_LEASE_SECONDS"] == "360"
    assert env["RUNONCE_DATABASE"] == "runonce"


def test_the_deployed_services_account_may_use_only_the_ledger(stack):
    account = "google_service_account.closer-service-identity-runtime-account.email"
    grants = [
        grant for grant in stack.resources("google_project_iam_member").values() if account in grant["member"]
    ]
    assert [grant["role"] for grant in grants] == ["roles/datastore.user"]
    assert grants[0]["condition"]["expression"] == 'resource.name == "projects/acme-prod-1/databases/runonce"'


def test_the_deployed_service_waits_for_its_grants(stack):
    service = resource(stack, "google_cloud_run_v2_service", "closer-service")
    assert "time_sleep.iam-settled" in service["depends_on"]
    sleep = stack.resources("time_sleep")["iam-settled"]
    assert sleep["triggers"]["services"] == "closer"
    assert "google_project_iam_member.closer-service-identity-runtime-ledger" in sleep["depends_on"]


# --- the existing service ---


def test_the_existing_service_is_read_and_checked_at_plan_time(stack):
    read = data(stack, "google_cloud_run_v2_service", "billing-api-service")
    assert (read["name"], read["location"], read["project"]) == ("billing-api", "europe-west1", "acme-prod-1")
    # No depends_on on resources still to be created: the read happens at plan time.
    assert "depends_on" not in read
    conditions = [check["condition"] for check in read["lifecycle"]["postcondition"]]
    # Evaluated by Terraform in tests/stacks/test_conditions.py.
    assert conditions == [
        f'${{can(regex("{USER_MANAGED_ACCOUNT}", self.template[0].service_account))}}',
        '${self.uri != ""}',
        '${self.template[0].timeout == "900s"}',
    ]


def test_the_existing_services_account_gets_the_ledger(stack):
    grant = resource(stack, "google_project_iam_member", "billing-api-service-ledger")
    assert grant["member"] == (
        "serviceAccount:${data.google_cloud_run_v2_service.billing-api-service.template[0].service_account}"
    )
    assert grant["role"] == "roles/datastore.user"
    assert "databases/runonce" in grant["condition"]["expression"]


# --- the Scheduler jobs and the invoker grants ---


def test_each_service_has_one_invoker_grant_on_that_service_only(stack):
    grants = stack.resources("google_cloud_run_v2_service_iam_member")
    services = sorted(grant["name"] for grant in grants.values() if "watchdog" not in grant["name"])
    assert services == [
        "${data.google_cloud_run_v2_service.billing-api-service.name}",
        "${google_cloud_run_v2_service.closer-service.name}",
    ]
    assert {grant["role"] for grant in grants.values()} == {"roles/run.invoker"}


@pytest.mark.parametrize(
    ("job", "base", "path"),
    [
        ("close", "google_cloud_run_v2_service.closer-service", "/jobs/close"),
        ("reopen", "google_cloud_run_v2_service.closer-service", "/jobs/reopen"),
        ("invoice", "data.google_cloud_run_v2_service.billing-api-service", "/jobs/invoice"),
    ],
)
def test_a_service_job_calls_its_path_with_the_services_url_as_audience(stack, job, base, path):
    target = resource(stack, "google_cloud_scheduler_job", f"{job}-schedule")["http_target"]
    assert target["uri"] == f"${{{base}.uri}}{path}"
    assert target["oidc_token"]["audience"] == f"${{{base}.uri}}"
    assert (
        target["oidc_token"]["service_account_email"]
        == "${google_service_account.team-invoker-account.email}"
    )
    assert target["headers"] == {"X-Runonce-Project": "acme-prod-1", "X-Runonce-Location": "europe-west1"}


def test_a_service_job_waits_for_its_services_invoker_grant(stack):
    job = resource(stack, "google_cloud_scheduler_job", "reopen-schedule")
    assert "time_sleep.invoker-settled" in job["depends_on"]
    assert any("close-schedule_invoker" in dependency for dependency in job["depends_on"])


# --- App Engine ---


def test_an_app_engine_job_routes_to_its_service_and_version(stack):
    job = resource(stack, "google_cloud_scheduler_job", "archive-schedule")
    assert "http_target" not in job
    target = job["app_engine_http_target"]
    assert target["relative_uri"] == "/jobs/archive"
    assert target["app_engine_routing"] == {"service": "default", "version": "v7"}
    assert target["headers"] == {"X-Runonce-Project": "acme-prod-1", "X-Runonce-Location": "europe-west2"}
    assert job["attempt_deadline"] == "3600s"


def test_an_app_engine_job_without_a_version_goes_to_the_serving_one(stack):
    target = resource(stack, "google_cloud_scheduler_job", "sweep-schedule")["app_engine_http_target"]
    assert target["app_engine_routing"] == {"service": "worker"}


def test_the_app_engine_application_is_checked_and_never_created(stack):
    assert "google_app_engine_application" not in stack.document["resource"]
    read = data(stack, "google_service_accounts", "app-engine-default-account")
    assert (read["project"], read["regex"]) == ("acme-prod-1", r"^acme-prod-1@appspot\.gserviceaccount\.com$")
    # Evaluated by Terraform in tests/stacks/test_conditions.py.
    (check,) = read["lifecycle"]["postcondition"]
    assert check["condition"] == "${length(self.accounts) > 0}"
    assert "gcloud app create" in check["error_message"]


def _waits_for_the_application_check(stack) -> dict[str, bool]:
    check = "data.google_service_accounts.app-engine-default-account"
    return {
        name.split("_")[0]: check in job.get("depends_on", [])
        for name, job in stack.resources("google_cloud_scheduler_job").items()
        if "app_engine_http_target" in job
    }


def test_every_app_engine_job_waits_for_the_application_check(stack):
    assert _waits_for_the_application_check(stack) == {"sweep-schedule": True, "archive-schedule": True}


def test_app_engine_jobs_that_all_name_their_account_still_wait_for_the_application_check(archive_dir):
    own = "worker-run@acme-prod-1.iam.gserviceaccount.com"
    team = replace(TEAM, app_engine_jobs=[replace(job, service_account=own) for job in TEAM.app_engine_jobs])
    assert find_problems([team]) == []
    assert _waits_for_the_application_check(synthesize(team, archive_dir)) == {
        "sweep-schedule": True,
        "archive-schedule": True,
    }


def test_each_app_engine_account_gets_the_ledger_only(stack):
    members = {
        key: grant["member"]
        for key, grant in stack.resources("google_project_iam_member").items()
        if key.startswith("app-engine-")
    }
    assert members == {
        "app-engine-default-ledger": (
            "${data.google_service_accounts.app-engine-default-account.accounts[0].member}"
        ),
        "app-engine-worker-run-ledger": "${data.google_service_account.app-engine-worker-run-account.member}",
    }
    read = data(stack, "google_service_account", "app-engine-worker-run-account")
    assert read["account_id"] == "worker-run@acme-prod-1.iam.gserviceaccount.com"


# --- App Engine's region: Scheduler creates an App Engine job only there ---


def test_app_engine_jobs_need_the_applications_location():
    (problem,) = find_problems([replace(TEAM, app_engine_location="")])
    assert (problem.job, problem.field) == (None, "app_engine_location")
    assert "Location must equal" in problem.message
    assert "gcloud app describe --project=acme-prod-1 --format='value(locationId)'" in problem.fix


@pytest.mark.parametrize(
    ("given", "app_engine"), [("europe-west1", "europe-west"), ("us-central1", "us-central")]
)
def test_schedulers_name_of_an_app_engine_location_is_refused_naming_both(given, app_engine):
    (problem,) = find_problems([replace(TEAM, app_engine_location=given)])
    assert problem.field == "app_engine_location"
    assert repr(given) in problem.message and repr(app_engine) in problem.message
    assert f"app_engine_location={app_engine!r}" in problem.fix


def test_an_unknown_app_engine_location_is_refused_with_the_closest_names():
    (problem,) = find_problems([replace(TEAM, app_engine_location="europe-wets2")])
    assert problem.field == "app_engine_location"
    assert "'europe-wets2' is not an App Engine location" in problem.message
    assert "'europe-west2'" in problem.fix and "stacks/locations.py" in problem.fix


def test_an_app_engine_location_without_app_engine_jobs_is_reported():
    team = replace(TEAM, app_engine_jobs=[], app_engine_location="europe-west")
    assert problems(team) == [(None, "app_engine_location")]


@pytest.mark.parametrize(
    ("location", "region"),
    [("europe-west", "europe-west1"), ("us-central", "us-central1"), ("asia-northeast1", "asia-northeast1")],
)
def test_app_engines_location_names_schedulers_region(location, region):
    team = replace(TEAM, app_engine_location=location)
    assert find_problems([team]) == []
    assert (team.scheduler_region("archive"), team.scheduler_region("close")) == (region, "europe-west1")


def test_app_engine_jobs_are_created_and_keyed_in_the_applications_region(stack):
    for name in ("sweep", "archive"):
        job = resource(stack, "google_cloud_scheduler_job", f"{name}-schedule")
        assert job["region"] == "europe-west2"
        assert job["app_engine_http_target"]["headers"]["X-Runonce-Location"] == "europe-west2"
    close = resource(stack, "google_cloud_scheduler_job", "close-schedule")
    assert close["region"] == "europe-west1"
    assert close["http_target"]["headers"]["X-Runonce-Location"] == "europe-west1"


def test_the_watchdog_reads_and_catches_up_app_engine_jobs_in_their_region(stack):
    (function,) = [
        config
        for config in stack.resources("google_cloudfunctions2_function").values()
        if config["name"] == "acme-watchdog"
    ]
    text = function["service_config"]["environment_variables"]["RUNONCE_WATCHDOG_JOBS"]
    assert {job["job"]: job.get("location") for job in json.loads(text)} == {
        "close": None,
        "reopen": None,
        "invoice": None,
        "sweep": "europe-west2",
        "archive": "europe-west2",
    }
    # A moved Scheduler job is a new one: its runs are expected from its own deployment.
    assert resource(stack, "time_static", "watchdog_archive-since")["triggers"]["location"] == "europe-west2"
    assert "location" not in resource(stack, "time_static", "watchdog_close-since")["triggers"]
    resolved = re.sub(r"\$\{time_static\.[^}]+\.rfc3339\}", "2026-12-02T01:30:07Z", text)
    watch = Watch("acme", "acme-prod-1", "europe-west1", parse_jobs(resolved, "RUNONCE_WATCHDOG_JOBS"))
    assert [watch.scheduler_job(job) for job in watch.jobs if job.job in ("close", "archive")] == [
        "projects/acme-prod-1/locations/europe-west1/jobs/acme-close",
        "projects/acme-prod-1/locations/europe-west2/jobs/acme-archive",
    ]


def test_the_service_and_app_engine_jobs_are_valid_terraform_json(stack):
    assert Testing.to_have_resource(stack.json, "google_cloud_run_v2_service")
    assert Testing.to_have_data_source(stack.json, "google_cloud_run_v2_service")
