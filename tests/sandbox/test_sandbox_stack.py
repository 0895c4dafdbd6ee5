"""Offline: the sandbox team validates, and its synthesized stack holds what the sandbox tests
call, publish to, pull from and read (no cloud; not marked sandbox). Terraform cannot load the
google provider here, so the JSON is checked as written, not planned."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest

from stacks import naming
from stacks.config.targets import TARGET_VARIABLE, BuildTrigger
from stacks.team import EVENTARC, TEAMS_DIR, EventJob, Team, load_team_file
from stacks.validate import validate
from tests.sandbox import teams
from tests.sandbox.stack import SERVICE_OUTPUT, URI_OUTPUT, WORKFLOWS_API, synthesize
from tests.sandbox.teams import SandboxPlace

PLACE = SandboxPlace("runonce-sandbox-test", "europe-west1")
TRIGGER = f"projects/{PLACE.project}/locations/{PLACE.region}/triggers/sandbox-trigger"
TRIGGER_ACCOUNT = f"trigger@{PLACE.project}.iam.gserviceaccount.com"
SERVICE_IMAGE = f"{PLACE.region}-docker.pkg.dev/{PLACE.project}/jobs/closer:1"


@dataclasses.dataclass(frozen=True)
class Synthesized:
    """The sandbox team and its stack's Terraform JSON."""

    team: Team
    document: dict[str, Any]

    def resources(self, kind: str) -> dict[str, dict[str, Any]]:
        """Every resource of one type, by logical id."""
        return self.document["resource"].get(kind, {})

    def named(self, kind: str, name: str) -> tuple[str, dict[str, Any]]:
        """The one resource of `kind` whose `name` is `name`: (logical id, configuration)."""
        [found] = [(id, config) for id, config in self.resources(kind).items() if config.get("name") == name]
        return found

    def function(self, job: str) -> dict[str, Any]:
        """The job's function."""
        return self.named("google_cloudfunctions2_function", naming.function_name(self.team.name, job))[1]

    def environment(self, job: str) -> dict[str, str]:
        """The environment variables of the job's function."""
        return self.function(job)["service_config"]["environment_variables"]

    def subscription(self, name: str) -> dict[str, Any]:
        """The subscription named `name`."""
        return self.named("google_pubsub_subscription", name)[1]


@pytest.fixture(scope="module")
def sandbox(tmp_path_factory) -> Synthesized:
    """The sandbox team with a build trigger and the service jobs, synthesized into a temporary folder."""
    team = teams.sandbox_team(PLACE, TRIGGER, TRIGGER_ACCOUNT, SERVICE_IMAGE)
    out = tmp_path_factory.mktemp("sandbox")
    synthesize(team, PLACE, out / "cdktf.out", out / "archives")
    return Synthesized(
        team, json.loads((out / "cdktf.out" / "stacks" / team.name / "cdk.tf.json").read_text())
    )


def test_the_sandbox_team_validates_with_and_without_a_build_trigger():
    validate([teams.sandbox_team(PLACE, TRIGGER, TRIGGER_ACCOUNT)])
    team = teams.sandbox_team(PLACE)
    validate([team])
    assert teams.BUILD not in {job.name for job in team.jobs}


def test_the_sandbox_team_keeps_the_example_teams_jobs_as_shipped():
    example = load_team_file(TEAMS_DIR / "example.py")
    team = teams.sandbox_team(PLACE)
    assert [job for job in team.jobs if job.name in {each.name for each in example.jobs}] == example.jobs
    assert [job for job in team.event_jobs if job.name == teams.ORDERS] == example.event_jobs


def test_the_push_and_eventarc_jobs_use_the_defaults_a_team_gets():
    team = teams.sandbox_team(PLACE)
    jobs = {job.name: job for job in team.event_jobs}
    assert jobs[teams.PUSHED] == EventJob(name=teams.PUSHED, source=teams.EVENTS_SOURCE)
    assert jobs[teams.MESSAGES] == EventJob(
        name=teams.MESSAGES, source=teams.CLOUD_EVENT_SOURCE, trigger=EVENTARC
    )
    assert jobs[teams.UPLOADS] == EventJob(
        name=teams.UPLOADS, source=teams.CLOUD_EVENT_SOURCE, trigger=EVENTARC, bucket=PLACE.upload_bucket
    )
    assert Path(jobs[teams.UPLOADS].source_dir).resolve() == teams.CLOUD_EVENT_FOLDER


def test_the_push_jobs_have_their_topics_push_and_dead_letter_subscriptions(sandbox):
    for job in (teams.ORDERS, teams.PUSHED, teams.STALE):
        sandbox.named("google_pubsub_topic", naming.topic_name(sandbox.team.name, job))
        sandbox.named("google_pubsub_subscription", naming.push_subscription_name(sandbox.team.name, job))
        sandbox.named(
            "google_pubsub_subscription", naming.dead_letter_subscription_name(sandbox.team.name, job)
        )


def test_the_stale_job_redelivers_after_its_maximum_age(sandbox):
    _, push = sandbox.named(
        "google_pubsub_subscription", naming.push_subscription_name(sandbox.team.name, teams.STALE)
    )
    assert push["retry_policy"]["minimum_backoff"] == f"{teams.STALE_FIRST_REDELIVERY_SECONDS}s"
    environment = sandbox.function(teams.STALE)["service_config"]["environment_variables"]
    assert environment["RUNONCE_MAX_EVENT_AGE_SECONDS"] == str(teams.STALE_MAX_EVENT_AGE_SECONDS)
    assert teams.STALE_FIRST_REDELIVERY_SECONDS > teams.STALE_MAX_EVENT_AGE_SECONDS


def test_the_eventarc_jobs_listen_to_the_sandbox_bucket_and_topic(sandbox):
    uploads = sandbox.function(teams.UPLOADS)["event_trigger"]
    assert {"attribute": "bucket", "value": PLACE.upload_bucket} in uploads["event_filters"]
    messages = sandbox.function(teams.MESSAGES)["event_trigger"]
    topic_id, _ = sandbox.named("google_pubsub_topic", naming.topic_name(sandbox.team.name, teams.MESSAGES))
    assert messages["pubsub_topic"] == f"${{google_pubsub_topic.{topic_id}.id}}"


def test_the_stack_creates_the_bucket_and_the_cloud_run_job_the_jobs_point_at(sandbox):
    _, bucket = sandbox.named("google_storage_bucket", PLACE.upload_bucket)
    assert bucket["force_destroy"] is True and bucket["public_access_prevention"] == "enforced"
    _, job = sandbox.named("google_cloud_run_v2_job", PLACE.target_job_id)
    assert job["deletion_protection"] is False
    assert job["template"]["template"]["containers"][0]["image"] == teams.TARGET_JOB_IMAGE
    assert json.loads(sandbox.environment(teams.RUN_JOB)[TARGET_VARIABLE])["job"] == PLACE.target_job


@pytest.mark.parametrize(
    ("kind", "name"),
    [
        ("google_storage_bucket", PLACE.upload_bucket),
        ("google_cloud_run_v2_job", PLACE.target_job_id),
        ("google_workflows_workflow", PLACE.workflow_id),
    ],
)
def test_everything_that_names_a_sandbox_resource_waits_for_it(sandbox, kind, name):
    target_id, _ = sandbox.named(kind, name)
    address = f"{kind}.{target_id}"
    naming_it = [
        (resource_kind, id, config)
        for resource_kind, resources in sandbox.document["resource"].items()
        for id, config in resources.items()
        if f"{resource_kind}.{id}" != address and name in json.dumps({**config, "depends_on": []})
    ]
    assert naming_it, f"nothing names {name}"
    for resource_kind, id, config in naming_it:
        assert address in config.get("depends_on", []), f"{resource_kind}.{id} does not wait for {address}"


def test_the_workflow_exists_without_interpolation_and_the_workflow_job_starts_it(sandbox):
    _, workflow = sandbox.named("google_workflows_workflow", PLACE.workflow_id)
    assert workflow["deletion_protection"] is False and "${" not in workflow["source_contents"]
    assert WORKFLOWS_API in {api["service"] for api in sandbox.resources("google_project_service").values()}
    assert json.loads(sandbox.environment(teams.WORKFLOW)[TARGET_VARIABLE])["workflow"] == PLACE.workflow


def test_the_build_job_starts_the_given_trigger_as_its_account_where_the_api_has_the_field(sandbox):
    target = json.loads(
        sandbox.function(teams.BUILD)["service_config"]["environment_variables"]["RUNONCE_TARGET"]
    )
    assert target["trigger"] == TRIGGER
    if "service_account" in {each.name for each in dataclasses.fields(BuildTrigger)}:
        assert target["service_account"] == TRIGGER_ACCOUNT


def test_the_scheduler_jobs_the_tests_force_exist(sandbox):
    for job in (teams.REPORT, teams.RUN_JOB, teams.WORKFLOW, teams.BUILD):
        sandbox.named("google_cloud_scheduler_job", naming.scheduler_job_name(sandbox.team.name, job))


def test_every_function_has_its_uri_and_service_as_outputs(sandbox):
    functions = {
        id: config["name"] for id, config in sandbox.resources("google_cloudfunctions2_function").items()
    }
    prefix = f"{sandbox.team.name}-"
    for id, name in functions.items():
        job = name.removeprefix(prefix)
        assert sandbox.document["output"][URI_OUTPUT.format(job)]["value"] == (
            f"${{google_cloudfunctions2_function.{id}.service_config[0].uri}}"
        )
        assert sandbox.document["output"][SERVICE_OUTPUT.format(job)]["value"] == (
            f"${{google_cloudfunctions2_function.{id}.service_config[0].service}}"
        )


def test_the_sandbox_team_has_service_jobs_only_with_an_image():
    validate([teams.sandbox_team(PLACE, service_image=SERVICE_IMAGE)])
    assert not teams.sandbox_team(PLACE).service_jobs


def test_the_existing_service_exists_before_the_team_reads_it(sandbox):
    service_id, service = sandbox.named("google_cloud_run_v2_service", teams.EXISTING_SERVICE)
    assert service["ingress"] == "INGRESS_TRAFFIC_INTERNAL_ONLY"
    assert service["template"]["service_account"].startswith(
        "${google_service_account.sandbox-existing-account"
    )
    env = {item["name"] for item in service["template"]["containers"][0]["env"]}
    assert {"RUNONCE_DATABASE", "RUNONCE_COLLECTION", "RUNONCE_LEASE_SECONDS"} <= env
    read = sandbox.document["data"]["google_cloud_run_v2_service"]
    (config,) = read.values()
    assert config["name"] == teams.EXISTING_SERVICE
    assert config["depends_on"] == [f"google_cloud_run_v2_service.{service_id}"]


def test_both_service_jobs_call_their_path(sandbox):
    jobs = {
        config["name"]: config["http_target"]["uri"]
        for config in sandbox.resources("google_cloud_scheduler_job").values()
        if "http_target" in config
    }
    for job in (teams.DEPLOYED_SERVICE_JOB, teams.EXISTING_SERVICE_JOB):
        assert jobs[naming.scheduler_job_name(sandbox.team.name, job)].endswith(teams.SERVICE_JOB_PATH)
