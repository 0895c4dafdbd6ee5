"""What each construct synthesizes, asserted on the example teams with cdktf's Testing matchers."""

from __future__ import annotations

from dataclasses import replace

import pytest
from cdktf import Testing as CdktfTesting

from stacks import naming
from stacks.config import defaults
from stacks.config.state import GcsState, missing_local_state
from stacks.constructs import provider
from stacks.constructs.archive import content_digest
from stacks.team import FUNCTIONS_DIR, REPO_ROOT, TEAMS_DIR, load_team_file
from tests.stacks.conftest import synthesize

EXAMPLE_JOBS = ["report", "sync", "catalog-sync", "ledger-close"]
EXAMPLE_EVENT_JOBS = ["orders"]
EXAMPLE_FUNCTIONS = [*EXAMPLE_JOBS, *EXAMPLE_EVENT_JOBS]
"""Every job has a function of its own: the scheduled jobs' timeouts differ, and an event job's
function is never shared."""
DEPLOYED_FUNCTIONS = [*EXAMPLE_FUNCTIONS, naming.WATCHDOG]
"""Every function the example deploys: its jobs' and its watchdog's (stacks/constructs/watchdog.py)."""
EXAMPLE_SERVICE_JOBS = ["books-close", "billing-close"]
"""The example's jobs on Cloud Run services: one on `closer`, which the stack deploys, one on
`billing-api`, which exists already."""
EXAMPLE_APIS = (*defaults.REQUIRED_APIS, defaults.API_PUBSUB)
"""The APIs the example team enables: its event job needs Pub/Sub."""


def ref(synth, kind: str, attribute: str, **match) -> str:
    """A Terraform reference to the one resource of `kind` whose arguments include `match`."""
    ids = [id for id, config in synth.resources(kind).items() if match.items() <= config.items()]
    assert len(ids) == 1, f"expected one {kind} matching {match}, found {ids}"
    return f"${{{kind}.{ids[0]}.{attribute}}}"


def account(synth, job: str | None, role: str, attribute: str = "member") -> str:
    """A service account: a function's runtime account (role "run", the function named after
    `job`) or the team's build or invoker account (role "build" or "call", job None); its email
    reference, or the IAM principal ("member") built from it."""
    account_id = (
        naming.account_id(synth.team.name, job, role)
        if job
        else naming.team_account_id(synth.team.name, role)
    )
    email = ref(synth, "google_service_account", "email", account_id=account_id)
    if attribute == "member":
        return f"serviceAccount:{email}"
    return email


def function_ref(synth, job: str, attribute: str) -> str:
    """Reference to a job's function."""
    return ref(
        synth, "google_cloudfunctions2_function", attribute, name=naming.function_name(synth.team.name, job)
    )


@pytest.mark.parametrize("api", defaults.REQUIRED_APIS)
def test_every_required_api_is_enabled_and_left_on_destroy(example, api):
    assert CdktfTesting.to_have_resource_with_properties(
        example.json,
        "google_project_service",
        {"project": "runonce-example", "service": api, "disable_on_destroy": False},
    )


def test_provider_carries_the_team_labels_with_hyphens_intact(example):
    assert CdktfTesting.to_have_provider_with_properties(
        example.json,
        "google",
        {
            "project": "runonce-example",
            "region": "europe-west1",
            "default_labels": {"owner": "platform", "cost-center": "demo", "runonce-team": "example"},
        },
    )


def test_each_team_keeps_its_own_state_file(example, payments):
    assert example.document["terraform"]["backend"] == {
        "local": {"path": "../../../terraform.example.tfstate"}
    }
    assert payments.document["terraform"]["backend"] == {
        "local": {"path": "../../../terraform.payments.tfstate"}
    }


def test_a_team_naming_a_gcs_bucket_keeps_its_state_there(archive_dir):
    state = GcsState(bucket="acme-terraform-state", prefix="runonce/example")
    shared = synthesize(replace(load_team_file(TEAMS_DIR / "example.py"), state=state), archive_dir)
    assert shared.document["terraform"]["backend"] == {
        "gcs": {"bucket": "acme-terraform-state", "prefix": "runonce/example"}
    }


def test_a_missing_local_state_file_is_reported_and_an_existing_one_is_not(tmp_path):
    assert "no Terraform state at terraform.orders.tfstate" in missing_local_state("orders", tmp_path)
    (tmp_path / "terraform.orders.tfstate").write_text("{}")
    assert missing_local_state("orders", tmp_path) is None


def test_a_team_without_state_yet_says_so_at_synth_and_a_gcs_team_does_not(archive_dir):
    # A name no one has deployed from this checkout: its local state file cannot exist.
    team = replace(load_team_file(TEAMS_DIR / "example.py"), name="never-deployed")
    local = synthesize(team, archive_dir).stack
    warnings = [entry.data for entry in local.node.metadata if entry.type == "@cdktf/warn"]
    assert warnings == [missing_local_state("never-deployed", REPO_ROOT)]
    state = GcsState(bucket="acme-terraform-state", prefix="runonce/never-deployed")
    shared = synthesize(replace(team, state=state), archive_dir).stack
    assert [entry for entry in shared.node.metadata if entry.type == "@cdktf/warn"] == []


@pytest.mark.parametrize(
    ("bucket", "prefix", "named"),
    [
        ("Acme_State", "runonce/orders", "bucket"),
        ("acme-terraform-state", "", "prefix"),
        ("acme-terraform-state", "/runonce/orders/", "prefix"),
    ],
)
def test_a_state_bucket_or_prefix_that_cannot_work_is_refused_when_the_team_file_loads(bucket, prefix, named):
    with pytest.raises(ValueError, match=f"GcsState {named}"):
        GcsState(bucket=bucket, prefix=prefix)


def test_the_time_provider_is_pinned_beside_google(example):
    assert example.document["terraform"]["required_providers"]["time"] == {
        "source": "hashicorp/time",
        "version": "0.13.1",
    }
    assert example.document["provider"]["time"] == [{}]


def depends_on(synth, kind: str, **match) -> list[str]:
    """The depends_on list of the one resource of `kind` whose arguments include `match`."""
    found = [config for config in synth.resources(kind).values() if match.items() <= config.items()]
    assert len(found) == 1, f"expected one {kind} matching {match}"
    return found[0].get("depends_on", [])


def address(synth, kind: str, **match) -> str:
    """`type.name` of the one resource of `kind` whose arguments include `match`."""
    return ref(synth, kind, "x", **match).removeprefix("${").removesuffix(".x}")


def test_apis_settle_for_sixty_seconds_after_all_of_them_are_enabled(example):
    # The example team has an event job, so Pub/Sub is enabled after the APIs every team needs.
    services = (*defaults.REQUIRED_APIS, defaults.API_PUBSUB)
    apis = [address(example, "google_project_service", service=api) for api in services]
    assert CdktfTesting.to_have_resource_with_properties(
        example.json,
        "time_sleep",
        {
            "create_duration": "60s",
            "depends_on": apis,
            "triggers": {"services": ",".join(sorted(services))},
        },
    )


def test_a_team_without_event_jobs_does_not_enable_pubsub(payments):
    services = {config["service"] for config in payments.resources("google_project_service").values()}
    assert defaults.API_PUBSUB not in services


@pytest.mark.parametrize(
    ("kind", "match", "apis"),
    [
        ("google_firestore_database", {"name": "runonce"}, ["firestore"]),
        ("google_firestore_field", {"field": "expire_at", "collection": "scheduler_runs"}, ["firestore"]),
        ("google_firestore_index", {"collection": "scheduler_runs"}, ["firestore"]),
        ("google_storage_bucket", {"name": "runonce-example-example-sources"}, ["storage"]),
        ("google_storage_bucket_object", {}, ["storage"]),
        ("google_artifact_registry_repository", {"repository_id": "example-functions"}, ["artifactregistry"]),
        ("google_service_account", {"account_id": "example-build"}, ["iam"]),
        ("google_service_account", {"account_id": "example-call"}, ["iam"]),
        ("google_service_account", {"account_id": "example-report-run"}, ["iam"]),
        (
            "google_cloudfunctions2_function",
            {"name": "example-report"},
            ["cloudfunctions", "run", "cloudbuild"],
        ),
        ("google_cloud_scheduler_job", {"name": "example-report"}, ["cloudscheduler"]),
        ("google_cloud_run_v2_service_iam_member", {"role": "roles/run.invoker"}, ["run"]),
    ],
)
def test_resources_wait_for_their_api_and_the_settling_after_it(example, kind, match, apis):
    if kind == "google_cloud_run_v2_service_iam_member":
        match = {**match, "name": function_ref(example, "report", "service_config[0].service")}
    if kind == "google_storage_bucket_object":
        match = {**match, "name": source_object()}
    listed = depends_on(example, kind, **match)
    settled = address(
        example,
        "time_sleep",
        create_duration="60s",
        depends_on=[address(example, "google_project_service", service=api) for api in EXAMPLE_APIS],
    )
    for api in apis:
        assert address(example, "google_project_service", service=f"{api}.googleapis.com") in listed
    assert settled in listed


def test_functions_are_created_sixty_seconds_after_every_grant_of_the_build_and_runtime_accounts(example):
    grants = [
        f"{kind}.{name}"
        for kind in example.document["resource"]
        if kind.endswith("_iam_member") and kind != "google_cloud_run_v2_service_iam_member"
        for name in example.resources(kind)
    ]
    # The grants that only the push subscription needs come after the function (it pushes to it),
    # or settle with the invoker grants (the service agent's token creator on the invoker).
    grants.remove(address(example, "google_pubsub_subscription_iam_member", role="roles/pubsub.subscriber"))
    grants.remove(address(example, "google_service_account_iam_member", role=defaults.ROLE_TOKEN_CREATOR))
    iam_settled = example.resources("time_sleep")["iam-settled"]
    assert iam_settled["create_duration"] == "60s"
    # Adding or removing a function changes the trigger, so the sleep is re-created and waits again.
    assert iam_settled["triggers"] == {
        "functions": "catalog-sync,ledger-close,orders,report,sync,watchdog",
        "services": "closer",
    }
    assert sorted(iam_settled["depends_on"]) == sorted(grants)
    # The team's build account has four grants, each function's runtime account one, the event
    # job's dead-letter topic two (its runtime account and the Pub/Sub service agent), the Pub/Sub
    # service agent's own role, the watchdog's account two (its own database, and the ledger
    # read only), each service's runtime account the ledger (closer's and billing-api's), and so
    # does the App Engine application's (the sweep job's).
    assert len(grants) == 4 + len(EXAMPLE_FUNCTIONS) + 2 + 1 + 2 + 2 + 1
    for config in example.resources("google_cloudfunctions2_function").values():
        assert "time_sleep.iam-settled" in config["depends_on"]


def test_the_project_number_comes_from_the_google_project_data_source(example):
    assert example.document["data"]["google_project"] == {"project": {"project_id": "runonce-example"}}


def test_ledger_is_a_protected_native_database_in_the_team_region(example):
    assert CdktfTesting.to_have_resource_with_properties(
        example.json,
        "google_firestore_database",
        {
            "project": "runonce-example",
            "name": "runonce",
            "location_id": "europe-west1",
            "type": "FIRESTORE_NATIVE",
            "delete_protection_state": "DELETE_PROTECTION_ENABLED",
            "deletion_policy": "ABANDON",
            "point_in_time_recovery_enablement": "POINT_IN_TIME_RECOVERY_DISABLED",
        },
    )


def test_point_in_time_recovery_follows_the_team_config(payments):
    assert CdktfTesting.to_have_resource_with_properties(
        payments.json,
        "google_firestore_database",
        {"location_id": "us-central1", "point_in_time_recovery_enablement": "POINT_IN_TIME_RECOVERY_ENABLED"},
    )


def test_ttl_policy_on_expire_at_with_empty_ttl_and_index_config(example):
    assert CdktfTesting.to_have_resource_with_properties(
        example.json,
        "google_firestore_field",
        {
            "project": "runonce-example",
            "database": ref(example, "google_firestore_database", "name", name="runonce"),
            "collection": "scheduler_runs",
            "field": "expire_at",
            "ttl_config": {},
            "index_config": {},
        },
    )


def test_source_bucket_is_private_and_versioned(example):
    assert CdktfTesting.to_have_resource_with_properties(
        example.json,
        "google_storage_bucket",
        {
            "name": "runonce-example-example-sources",
            "location": "europe-west1",
            "uniform_bucket_level_access": True,
            "public_access_prevention": "enforced",
            "versioning": {"enabled": True},
        },
    )
    assert next(iter(example.resources("google_storage_bucket").values()))["force_destroy"] is False


def test_noncurrent_source_archives_are_deleted_after_thirty_days(example):
    assert CdktfTesting.to_have_resource_with_properties(
        example.json,
        "google_storage_bucket",
        {
            "name": "runonce-example-example-sources",
            "lifecycle_rule": [
                {
                    "action": {"type": "Delete"},
                    "condition": {"days_since_noncurrent_time": 30, "send_age_if_zero": False},
                }
            ],
        },
    )
    (bucket,) = example.resources("google_storage_bucket").values()
    # Only the noncurrent condition: an age or a live-object condition would delete the
    # archive a function is built from.
    assert bucket["lifecycle_rule"][0]["condition"] == {
        "days_since_noncurrent_time": 30,
        "send_age_if_zero": False,
    }


def test_a_sandbox_team_may_destroy_its_non_empty_source_bucket(archive_dir):
    team = replace(load_team_file(TEAMS_DIR / "example.py"), force_destroy=True)
    sandbox = synthesize(team, archive_dir)
    assert CdktfTesting.to_have_resource_with_properties(
        sandbox.json,
        "google_storage_bucket",
        {"name": "runonce-example-example-sources", "force_destroy": True},
    )


def test_image_repository_keeps_the_newest_five_versions_and_deletes_older_images(example):
    assert CdktfTesting.to_have_resource_with_properties(
        example.json,
        "google_artifact_registry_repository",
        {
            "repository_id": "example-functions",
            "cleanup_policy_dry_run": False,
            "cleanup_policies": [
                {
                    "id": "delete-old-images",
                    "action": "DELETE",
                    "condition": {"tag_state": "ANY", "older_than": "30d"},
                },
                {"id": "keep-recent-images", "action": "KEEP", "most_recent_versions": {"keep_count": 5}},
            ],
        },
    )


def test_build_images_go_to_the_team_repository(example):
    assert CdktfTesting.to_have_resource_with_properties(
        example.json,
        "google_artifact_registry_repository",
        {"repository_id": "example-functions", "location": "europe-west1", "format": "DOCKER"},
    )


def test_each_function_has_a_runtime_account_and_the_team_one_build_and_one_invoker_account(example):
    ids = sorted(config["account_id"] for config in example.resources("google_service_account").values())
    # The example's four scheduled jobs differ in their timeouts or their source, so each has a
    # function of its own, and so has its event job.
    # The deployed service `closer` has its own runtime account too; the existing one has its own.
    assert ids == sorted(
        [
            "example-build",
            "example-call",
            "example-closer-run",
            *(f"example-{job}-run" for job in DEPLOYED_FUNCTIONS),
        ]
    )
    assert all(
        config["project"] == "runonce-example"
        for config in example.resources("google_service_account").values()
    )


@pytest.mark.parametrize("job", EXAMPLE_JOBS)
def test_function_is_gen2_internal_only_and_runs_as_its_runtime_account(example, job):
    config = next(j for j in example.team.jobs if j.name == job)
    bucket = ref(example, "google_storage_bucket", "name", name="runonce-example-example-sources")
    assert CdktfTesting.to_have_resource_with_properties(
        example.json,
        "google_cloudfunctions2_function",
        {
            "name": f"example-{job}",
            "project": "runonce-example",
            "location": "europe-west1",
            "description": config.description,
            "labels": {"runonce-function": job},
            "lifecycle": {"create_before_destroy": True},
            "build_config": {
                "runtime": "python312",
                "entry_point": "handle",
                "service_account": "projects/runonce-example/serviceAccounts/"
                f"{account(example, None, 'build', 'email')}",
                "docker_repository": ref(
                    example, "google_artifact_registry_repository", "id", repository_id="example-functions"
                ),
                "source": {
                    "storage_source": {
                        "bucket": bucket,
                        "object": source_object(config.source),
                    }
                },
            },
            "service_config": {
                "ingress_settings": "ALLOW_INTERNAL_ONLY",
                "service_account_email": account(example, job, "run", "email"),
                "timeout_seconds": config.timeout_seconds,
                "available_memory": "256Mi",
                "min_instance_count": 0,
                "max_instance_count": 3,
                "all_traffic_on_latest_revision": True,
            },
        },
    )


def source_object(source: str = "report") -> str:
    """The object name of a source folder of the example (its jobs on functions/report share one)."""
    digest = content_digest({"": FUNCTIONS_DIR / source, "runonce": FUNCTIONS_DIR / "runonce"})
    return naming.source_object_name(digest)


@pytest.mark.parametrize(
    ("job", "lease", "retention"),
    [("report", "180", "604800"), ("sync", "120", "604800"), ("ledger-close", "360", "1209600")],
)
def test_function_environment_comes_from_the_team_and_job_config(example, job, lease, retention):
    assert CdktfTesting.to_have_resource_with_properties(
        example.json,
        "google_cloudfunctions2_function",
        {
            "name": f"example-{job}",
            "service_config": {
                "environment_variables": {
                    "GOOGLE_CLOUD_PROJECT": "runonce-example",
                    "RUNONCE_DATABASE": "runonce",
                    "RUNONCE_COLLECTION": "scheduler_runs",
                    "RUNONCE_LEASE_SECONDS": lease,
                    "RUNONCE_RETENTION_SECONDS": retention,
                }
            },
        },
    )


def test_jobs_built_from_the_same_files_share_one_upload_named_by_its_digest(example):
    assert CdktfTesting.to_have_resource_with_properties(
        example.json,
        "google_storage_bucket_object",
        {
            "bucket": ref(example, "google_storage_bucket", "name", name="runonce-example-example-sources"),
            "name": source_object(),
        },
    )
    # The scheduled jobs of functions/report share one upload; the event job's folder is a second
    # one, the watchdog's a third, functions/sync (catalog-sync) a fourth.
    uploads = example.resources("google_storage_bucket_object")
    assert len(uploads) == 4
    (upload,) = [name for name in uploads if name.startswith("build_report-source")]
    function_ids = {
        config["name"].removeprefix("example-"): f"google_storage_bucket_object.{upload}"
        in config["depends_on"]
        for config in example.resources("google_cloudfunctions2_function").values()
    }
    assert function_ids == {
        "report": True,
        "sync": True,
        "catalog-sync": False,
        "ledger-close": True,
        "orders": False,
        "watchdog": False,
    }


@pytest.mark.parametrize("job", EXAMPLE_JOBS)
def test_runtime_account_may_use_the_ledger_database_only(example, job):
    assert CdktfTesting.to_have_resource_with_properties(
        example.json,
        "google_project_iam_member",
        {
            "project": "runonce-example",
            "role": "roles/datastore.user",
            "member": account(example, job, "run"),
            "condition": {"expression": 'resource.name == "projects/runonce-example/databases/runonce"'},
        },
    )


GCF_SOURCES = "projects/_/buckets/gcf-v2-sources-${data.google_project.project.number}-europe-west1"


def test_build_account_reads_googles_gcf_v2_sources_bucket_of_the_region_only(example):
    assert CdktfTesting.to_have_resource_with_properties(
        example.json,
        "google_project_iam_member",
        {
            "project": "runonce-example",
            "role": "roles/storage.objectViewer",
            "member": account(example, None, "build"),
            "condition": {
                "title": "runonce-gcf-sources-only",
                "expression": f'resource.name == "{GCF_SOURCES}" || '
                f'resource.name.startsWith("{GCF_SOURCES}/objects/")',
            },
        },
    )


def test_build_account_reads_sources_pushes_images_and_writes_logs(example):
    member = account(example, None, "build")
    assert CdktfTesting.to_have_resource_with_properties(
        example.json,
        "google_storage_bucket_iam_member",
        {
            "bucket": ref(example, "google_storage_bucket", "name", name="runonce-example-example-sources"),
            "role": "roles/storage.objectViewer",
            "member": member,
        },
    )
    assert CdktfTesting.to_have_resource_with_properties(
        example.json,
        "google_artifact_registry_repository_iam_member",
        {
            "repository": ref(
                example, "google_artifact_registry_repository", "name", repository_id="example-functions"
            ),
            "role": "roles/artifactregistry.writer",
            "member": member,
        },
    )
    assert CdktfTesting.to_have_resource_with_properties(
        example.json,
        "google_project_iam_member",
        {"project": "runonce-example", "role": "roles/logging.logWriter", "member": member},
    )


def test_build_account_holds_nothing_else_and_every_function_is_built_as_it(example):
    build_members = {account(example, None, "build")}
    grants = [
        (kind, config["role"])
        for kind in example.document["resource"]
        if kind.endswith("_iam_member")
        for config in example.resources(kind).values()
        if config["member"] in build_members
    ]
    assert sorted(grants) == sorted(
        [
            ("google_storage_bucket_iam_member", "roles/storage.objectViewer"),
            ("google_project_iam_member", "roles/storage.objectViewer"),
            ("google_artifact_registry_repository_iam_member", "roles/artifactregistry.writer"),
            ("google_project_iam_member", "roles/logging.logWriter"),
        ]
    )
    build = f"projects/runonce-example/serviceAccounts/{account(example, None, 'build', 'email')}"
    functions = example.resources("google_cloudfunctions2_function").values()
    assert [config["build_config"]["service_account"] for config in functions] == [build] * len(
        DEPLOYED_FUNCTIONS
    )


@pytest.mark.parametrize("job", EXAMPLE_FUNCTIONS)
def test_the_team_invoker_may_call_each_function_service_and_is_replaced_new_grant_first(example, job):
    assert CdktfTesting.to_have_resource_with_properties(
        example.json,
        "google_cloud_run_v2_service_iam_member",
        {
            "project": "runonce-example",
            "location": "europe-west1",
            "name": function_ref(example, job, "service_config[0].service"),
            "role": "roles/run.invoker",
            "member": account(example, None, "call"),
            "lifecycle": {"create_before_destroy": True},
        },
    )


def test_the_invoker_holds_run_invoker_on_the_teams_services_and_nothing_else(example):
    invoker = account(example, None, "call")
    grants = [
        (kind, config["role"], config.get("name"))
        for kind in example.document["resource"]
        if kind.endswith("_iam_member")
        for config in example.resources(kind).values()
        if config["member"] == invoker
    ]
    services = [
        ref(example, "google_cloud_run_v2_service", "name", name="closer"),
        "${data.google_cloud_run_v2_service.billing-api-service.name}",
    ]
    assert sorted(grants) == sorted(
        ("google_cloud_run_v2_service_iam_member", "roles/run.invoker", service)
        for service in [
            *(function_ref(example, job, "service_config[0].service") for job in DEPLOYED_FUNCTIONS),
            *services,
        ]
    )


def test_scheduler_jobs_are_created_or_repointed_two_minutes_after_every_invoker_grant(example):
    # The watchdog's grant has a wait of its own (tests/stacks/test_watchdog.py): its function
    # follows the Scheduler jobs it watches.
    grants = [
        f"google_cloud_run_v2_service_iam_member.{name}"
        for name in example.resources("google_cloud_run_v2_service_iam_member")
        if not name.startswith("watchdog_")
    ]
    # The example's event job pushes, so the Pub/Sub agent's token creator grant and its own role
    # (it signs the push tokens) settle here too.
    token_creator = address(example, "google_service_account_iam_member", role=defaults.ROLE_TOKEN_CREATOR)
    agent_role = address(example, "google_project_iam_member", role="roles/pubsub.serviceAgent")
    settled = example.resources("time_sleep")["invoker-settled"]
    # IAM: policy changes "typically propagate in 2 minutes" (docs/stacks.md, First deploy).
    assert settled["create_duration"] == "120s"
    assert settled["triggers"] == {
        "functions": "billing-api,catalog-sync,closer,ledger-close,orders,report,sync"
    }
    assert sorted(settled["depends_on"]) == sorted([*grants, token_creator, agent_role])
    for job in EXAMPLE_JOBS:
        listed = depends_on(example, "google_cloud_scheduler_job", name=f"example-{job}")
        assert "time_sleep.invoker-settled" in listed
        (own_grant,) = [
            grant
            for grant in grants
            if example.resources("google_cloud_run_v2_service_iam_member")[grant.split(".")[1]]["name"]
            == function_ref(example, job, "service_config[0].service")
        ]
        assert own_grant in listed


def test_scheduler_job_posts_to_the_run_app_uri_with_an_oidc_token_for_it_and_runonce_headers(example):
    url = function_ref(example, "sync", "service_config[0].uri")
    assert CdktfTesting.to_have_resource_with_properties(
        example.json,
        "google_cloud_scheduler_job",
        {
            "name": "example-sync",
            "project": "runonce-example",
            "region": "europe-west1",
            "description": "Publish the inventory sync report every two minutes",
            "schedule": "*/2 * * * *",
            "time_zone": "Etc/UTC",
            "attempt_deadline": "30s",
            "retry_config": {
                "retry_count": 5,
                "max_retry_duration": "0s",
                "min_backoff_duration": "5s",
                "max_backoff_duration": "60s",
                "max_doublings": 4,
            },
            "http_target": {
                "uri": url,
                "http_method": "POST",
                "headers": {"X-Runonce-Project": "runonce-example", "X-Runonce-Location": "europe-west1"},
                "oidc_token": {
                    "service_account_email": account(example, None, "call", "email"),
                    "audience": url,
                },
            },
        },
    )


@pytest.mark.parametrize("job", EXAMPLE_JOBS)
def test_every_job_gets_a_scheduler_job_with_its_schedule_and_time_zone(example, job):
    config = next(j for j in example.team.jobs if j.name == job)
    assert CdktfTesting.to_have_resource_with_properties(
        example.json,
        "google_cloud_scheduler_job",
        {
            "name": f"example-{job}",
            "schedule": config.schedule,
            "time_zone": config.time_zone,
            "attempt_deadline": f"{config.attempt_deadline_seconds}s",
        },
    )


def test_constructs_expose_the_resources_they_create(example):
    stack = example.stack
    function, job = stack.functions["report"], stack.jobs["report"]
    exposed = {
        stack.store.database: provider.FirestoreDatabase,
        stack.store.ttl_field: provider.FirestoreField,
        stack.build.bucket: provider.StorageBucket,
        stack.build.repository: provider.ArtifactRegistryRepository,
        function.function: provider.Cloudfunctions2Function,
        function.identity.runtime_account: provider.ServiceAccount,
        function.identity.ledger_grant: provider.ProjectIamMember,
        stack.identity.build_account: provider.ServiceAccount,
        stack.identity.invoker_account: provider.ServiceAccount,
        stack.iam_settled: provider.Sleep,
        stack.invoker_settled: provider.Sleep,
        stack.apis.settled: provider.Sleep,
        stack.project: provider.DataGoogleProject,
        function.source_object: provider.StorageBucketObject,
        job.job: provider.CloudSchedulerJob,
        job.invoker_grant: provider.CloudRunV2ServiceIamMember,
    }
    assert all(isinstance(resource, kind) for resource, kind in exposed.items())
    assert len(stack.identity.build_grants) == 4
    assert stack.function_of == {name: stack.functions[name] for name in EXAMPLE_JOBS}
    assert stack.retiring_accounts == []
    assert function.archive.path.is_file()
    assert sorted(stack.apis.services) == sorted(EXAMPLE_APIS)
