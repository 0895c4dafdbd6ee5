"""Each construct built alone from its props in a bare cdktf stack, with no team file: what it
makes depends only on the plain values it is given."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from cdktf import App, TerraformStack
from cdktf import Testing as CdktfTesting
from constructs import Construct

from runonce.contract import LOCATION_HEADER, PROJECT_HEADER
from stacks import naming
from stacks.config import defaults
from stacks.config.team import EventJob, PushRetry, Retry
from stacks.constructs.archive import build_archive
from stacks.constructs.build_storage import BuildStorage, BuildStorageProps
from stacks.constructs.dedup_store import DedupStore, DedupStoreProps
from stacks.constructs.deduplicated_function import (
    DeduplicatedFunction,
    DeduplicatedFunctionProps,
    FunctionSpec,
)
from stacks.constructs.event_job import EventDelivery, EventDeliveryProps
from stacks.constructs.function_identity import FunctionIdentity, FunctionIdentityProps
from stacks.constructs.provider import Sleep
from stacks.constructs.required_apis import RequiredApis, RequiredApisProps
from stacks.constructs.scheduled_job import ScheduledJob, ScheduledJobProps
from stacks.constructs.team_identity import TeamIdentity, TeamIdentityProps

PROJECT = "acme-alone-1"
REGION = "europe-west1"


def bare_stack(*more_apis: str) -> tuple[TerraformStack, RequiredApis]:
    """A stack holding nothing but the enabled APIs the constructs depend on."""
    stack = TerraformStack(CdktfTesting.app(), "alone")
    services = (*defaults.REQUIRED_APIS, *more_apis)
    return stack, RequiredApis(stack, "apis", RequiredApisProps(project=PROJECT, services=services))


def resources(stack: TerraformStack, kind: str) -> list[dict[str, Any]]:
    """The synthesized resources of one type, in id order."""
    found = json.loads(CdktfTesting.synth(stack))["resource"].get(kind, {})
    return [found[key] for key in sorted(found)]


def store_in(scope: Construct, apis: RequiredApis, database: str = "orders-ledger") -> DedupStore:
    return DedupStore(
        scope,
        "ledger",
        DedupStoreProps(project=PROJECT, database=database, location="eur3", collection="runs", apis=apis),
    )


def test_required_apis_alone_enable_each_service_and_wait_after_all_of_them():
    stack = TerraformStack(App(), "apis-alone")
    services = ("iam.googleapis.com", "run.googleapis.com")
    RequiredApis(stack, "apis", RequiredApisProps(project=PROJECT, services=services, settle="5s"))
    enabled = resources(stack, "google_project_service")
    assert [(api["project"], api["service"], api["disable_on_destroy"]) for api in enabled] == [
        (PROJECT, service, False) for service in services
    ]
    (settled,) = resources(stack, "time_sleep")
    assert settled["create_duration"] == "5s"
    assert settled["triggers"] == {"services": ",".join(sorted(services))}


def test_a_dedup_store_alone_is_the_database_it_names_with_a_ttl_on_its_collection():
    stack, apis = bare_stack()
    store = store_in(stack, apis)
    (database,) = resources(stack, "google_firestore_database")
    assert (database["project"], database["name"], database["location_id"], database["type"]) == (
        PROJECT,
        "orders-ledger",
        "eur3",
        "FIRESTORE_NATIVE",
    )
    (ttl,) = resources(stack, "google_firestore_field")
    assert (ttl["collection"], ttl["field"], ttl["ttl_config"]) == ("runs", "expire_at", {})
    assert store.resource_name == f"projects/{PROJECT}/databases/orders-ledger"


def test_build_storage_alone_names_its_bucket_and_repository_after_the_team_it_is_given():
    stack, apis = bare_stack()
    BuildStorage(stack, "build", BuildStorageProps(project=PROJECT, region=REGION, team="orders", apis=apis))
    (bucket,) = resources(stack, "google_storage_bucket")
    assert bucket["name"] == f"{PROJECT}-orders-sources"
    assert (bucket["location"], bucket["public_access_prevention"]) == (REGION, "enforced")
    (repository,) = resources(stack, "google_artifact_registry_repository")
    assert (repository["location"], repository["repository_id"]) == (REGION, "orders-functions")


def team_identity(needs_invoker: bool) -> tuple[TerraformStack, TeamIdentity]:
    stack, apis = bare_stack()
    build = BuildStorage(
        stack, "build", BuildStorageProps(project=PROJECT, region=REGION, team="orders", apis=apis)
    )
    props = TeamIdentityProps(
        project=PROJECT,
        team="orders",
        needs_invoker=needs_invoker,
        build=build,
        apis=apis,
        gcf_sources_bucket=f"gcf-v2-sources-123-{REGION}",
    )
    return stack, TeamIdentity(stack, props)


def test_team_identity_alone_makes_the_build_account_with_its_four_grants_and_the_invoker():
    stack, identity = team_identity(needs_invoker=True)
    accounts = resources(stack, "google_service_account")
    assert sorted(account["account_id"] for account in accounts) == ["orders-build", "orders-call"]
    assert identity.invoker_account is not None
    assert len(identity.build_grants) == 4
    roles = sorted(grant["role"] for grant in resources(stack, "google_project_iam_member"))
    assert roles == sorted([defaults.ROLE_BUILD_GCF_SOURCE_READER, defaults.ROLE_BUILD_LOG_WRITER])


def test_team_identity_alone_makes_no_invoker_when_nothing_signs_as_it():
    stack, identity = team_identity(needs_invoker=False)
    assert [account["account_id"] for account in resources(stack, "google_service_account")] == [
        "orders-build"
    ]
    assert (identity.invoker_account, identity.invoker_email) == (None, "")


def test_a_function_identity_alone_may_use_the_ledger_database_it_is_given_and_nothing_else():
    stack, apis = bare_stack()
    store = store_in(stack, apis, database="orders-runs")
    FunctionIdentity(
        stack,
        "report-identity",
        FunctionIdentityProps(project=PROJECT, team="orders", function="report", store=store, apis=apis),
    )
    (account,) = resources(stack, "google_service_account")
    assert (account["project"], account["account_id"]) == (PROJECT, "orders-report-run")
    (grant,) = resources(stack, "google_project_iam_member")
    assert grant["role"] == defaults.ROLE_LEDGER
    assert grant["condition"]["expression"] == f'resource.name == "projects/{PROJECT}/databases/orders-runs"'
    assert grant["condition"]["description"] == "Only the orders-runs Firestore database"


@dataclass(frozen=True)
class Called:
    """A function as a Scheduler job sees it: its URI and its Cloud Run service."""

    uri: str
    service: str


def test_a_scheduled_job_alone_calls_the_uri_it_is_given_signed_for_that_audience():
    stack, apis = bare_stack()
    props = ScheduledJobProps(
        project=PROJECT,
        region=REGION,
        name="orders-report",
        schedule="0 3 * * *",
        time_zone="Europe/Berlin",
        attempt_deadline_seconds=120,
        retry=Retry(retry_count=2),
        invoker_email="orders-call@acme-alone-1.iam.gserviceaccount.com",
        apis=apis,
        body="hi",
    )
    job = ScheduledJob(stack, "report-schedule", props)
    function = Called(uri="https://orders-report-abc-ew.a.run.app", service="orders-report")
    grant = job.grant_invoker(function)
    job.schedule(function, after=[grant])
    (scheduler,) = resources(stack, "google_cloud_scheduler_job")
    assert (scheduler["name"], scheduler["schedule"], scheduler["time_zone"]) == (
        "orders-report",
        "0 3 * * *",
        "Europe/Berlin",
    )
    assert (scheduler["attempt_deadline"], scheduler["retry_config"]["retry_count"]) == ("120s", 2)
    target = scheduler["http_target"]
    assert (target["uri"], target["body"]) == (function.uri, "aGk=")
    assert target["headers"] == {PROJECT_HEADER: PROJECT, LOCATION_HEADER: REGION}
    assert target["oidc_token"] == {"service_account_email": props.invoker_email, "audience": function.uri}
    (invoker,) = resources(stack, "google_cloud_run_v2_service_iam_member")
    assert (invoker["name"], invoker["location"], invoker["role"]) == (
        "orders-report",
        REGION,
        "roles/run.invoker",
    )
    assert "description" not in scheduler


def test_a_deduplicated_function_alone_is_built_and_run_as_it_is_told_with_internal_ingress(tmp_path):
    folder = tmp_path / "report"
    folder.mkdir()
    (folder / "main.py").write_text("def handle(request):\n    return 'ok'\n")
    archive = build_archive({"": folder}, tmp_path / "archives")
    stack, apis = bare_stack()
    build = BuildStorage(
        stack, "build", BuildStorageProps(project=PROJECT, region=REGION, team="orders", apis=apis)
    )
    identity = FunctionIdentity(
        stack,
        "report-identity",
        FunctionIdentityProps(
            project=PROJECT, team="orders", function="report", store=store_in(stack, apis), apis=apis
        ),
    )
    settled = Sleep(stack, "iam-settled", create_duration="60s")
    spec = FunctionSpec(
        project=PROJECT,
        region=REGION,
        name="orders-report",
        label="report",
        source="report",
        runtime="python312",
        entry_point="handle",
        timeout_seconds=120,
        memory="512Mi",
        min_instances=0,
        max_instances=2,
        environment={"RUNONCE_DATABASE": "orders-ledger", "APP_MODE": "nightly"},
        labels={"owner": "orders"},
    )
    function = DeduplicatedFunction(
        stack,
        "report-function",
        DeduplicatedFunctionProps(
            spec=spec,
            build=build,
            apis=apis,
            identity=identity,
            build_email="orders-build@acme-alone-1.iam.gserviceaccount.com",
            iam_settled=settled,
            archive=archive,
        ),
    )
    (made,) = resources(stack, "google_cloudfunctions2_function")
    assert (made["name"], made["location"], made["labels"]) == (
        "orders-report",
        REGION,
        {"owner": "orders", defaults.FUNCTION_LABEL: "report"},
    )
    built = made["build_config"]
    assert (built["runtime"], built["entry_point"]) == ("python312", "handle")
    assert built["service_account"] == f"projects/{PROJECT}/serviceAccounts/{function.props.build_email}"
    assert built["source"]["storage_source"]["object"] == naming.source_object_name(archive.digest)
    served = made["service_config"]
    assert served["ingress_settings"] == defaults.INGRESS
    assert served["environment_variables"] == spec.environment
    assert (served["timeout_seconds"], served["available_memory"], served["max_instance_count"]) == (
        120,
        "512Mi",
        2,
    )
    assert "time_sleep.iam-settled" in made["depends_on"]
    assert "event_trigger" not in made


def test_an_event_delivery_alone_pushes_its_topic_to_the_function_it_is_given_with_a_dead_letter_topic():
    stack, apis = bare_stack(defaults.API_PUBSUB)
    job = EventJob(
        name="paid", source="events", retry=PushRetry(min_backoff_seconds=15), max_delivery_attempts=30
    )
    props = EventDeliveryProps(
        project=PROJECT,
        region=REGION,
        team="orders",
        job=job,
        runtime_email="orders-paid-run@acme-alone-1.iam.gserviceaccount.com",
        invoker_email="orders-call@acme-alone-1.iam.gserviceaccount.com",
        pubsub_agent="serviceAccount:service-123@gcp-sa-pubsub.iam.gserviceaccount.com",
        project_data="data.google_project.project",
        storage_agent_member="",
        apis=apis,
    )
    delivery = EventDelivery(stack, "paid-events", props)
    function = Called(uri="https://orders-paid-abc-ew.a.run.app", service="orders-paid")
    delivery.subscribe(function, after=[delivery.grant_invoker(function)])
    topics = sorted(topic["name"] for topic in resources(stack, "google_pubsub_topic"))
    assert topics == sorted(["orders-paid", naming.dead_letter_topic_name("orders", "paid")])
    by_name = {sub["name"]: sub for sub in resources(stack, "google_pubsub_subscription")}
    push = by_name[naming.push_subscription_name("orders", "paid")]
    assert (push["ack_deadline_seconds"], push["retry_policy"]["minimum_backoff"]) == (300, "15s")
    assert push["dead_letter_policy"]["max_delivery_attempts"] == 30
    assert push["push_config"]["push_endpoint"] == function.uri
    assert push["push_config"]["oidc_token"] == {
        "service_account_email": props.invoker_email,
        "audience": function.uri,
    }
    assert naming.dead_letter_subscription_name("orders", "paid") in by_name
    (invoker,) = resources(stack, "google_cloud_run_v2_service_iam_member")
    assert (invoker["name"], invoker["member"]) == ("orders-paid", f"serviceAccount:{props.invoker_email}")
    assert delivery.event_trigger() is None
