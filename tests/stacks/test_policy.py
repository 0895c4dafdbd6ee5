"""The least-privilege pack and checkov: the example teams pass, the deliberately bad stack fails."""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from policy.checkov import SKIPPED, run_checkov
from policy.pack import ACROSS_STACKS, LEAST_PRIVILEGE
from policy.runner import check_stack, check_stack_set
from stacks.team import REPO_ROOT, TEAMS_DIR, load_team_file
from tests.stacks.conftest import synthesize

BAD = Path(__file__).parent / "fixtures" / "bad.tf.json"
# A second stack that is fine on its own, but shares a bucket name, a repository name and its
# state file with the bad stack.
TWIN = Path(__file__).parent / "fixtures" / "bad-twin.tf.json"
CHECKOV = REPO_ROOT / ".venv" / "checkov" / "bin" / "checkov"
needs_checkov = pytest.mark.skipif(
    not CHECKOV.exists(), reason=f"checkov is not installed at {CHECKOV}: `make test` installs it"
)


def flagged(stack: dict) -> set[tuple[str, str]]:
    """(rule id, resource path) of every finding."""
    return {(finding.rule.id, finding.resource.path) for finding in check_stack("stack", stack)}


def flagged_together(stacks: dict[str, dict]) -> set[tuple[str, str, str]]:
    """(rule id, stack, resource path) of every finding of the rules over all stacks."""
    return {(finding.rule.id, finding.stack, finding.resource.path) for finding in check_stack_set(stacks)}


def test_example_teams_pass_the_pack(example, payments):
    assert flagged(example.document) == set()
    assert flagged(payments.document) == set()


def test_example_teams_pass_the_rules_over_all_stacks(example, payments):
    assert flagged_together({"example": example.document, "payments": payments.document}) == set()


def test_the_bad_stack_is_flagged_by_every_rule_at_the_right_resource():
    assert flagged(json.loads(BAD.read_text())) == {
        # A watchdog (its env names a ledger to read) whose own database is that ledger, and
        # whose account holds run.invoker and publisher grants; a job it watches has a catch-up
        # window and pause_after_failures, and its account holds neither grant a catch-up needs
        # nor the pauser role, and the stack's operators hold no resumer role.
        ("RO-WDG-2", "bad/twin-a"),
        ("RO-WDG-3", "bad/twin-a"),
        ("RO-WDG-4", "bad/twin-a"),
        ("RO-WDG-5", "bad/twin-a"),
        ("RO-WDG-1", "bad/invoker-everywhere"),
        ("RO-WDG-1", "bad/invoker-elsewhere"),
        ("RO-WDG-1", "bad/runtime-publishes-elsewhere"),
        # An operator with datastore.owner on the ledger, and without the verbs' other grants.
        ("RO-OPS-1", "bad/operator-owner"),
        ("RO-OPS-2", "bad/operator-ledger"),
        ("RO-IAM-1", "bad/owner"),
        ("RO-IAM-3", "bad/owner"),
        ("RO-IAM-3", "bad/ledger-everywhere"),
        ("RO-IAM-2", "bad/public-invoker"),
        ("RO-IAM-4", "bad/shared-account"),
        ("RO-IAM-4", "bad/unused-account"),
        # Two functions run as one account.
        ("RO-IAM-4", "bad/double-account"),
        # The account Scheduler signs as holds roles besides run.invoker; run.invoker is granted
        # on the project and on a service that is not the stack's own.
        ("RO-IAM-7", "bad/owner"),
        ("RO-IAM-7", "bad/ledger-everywhere"),
        ("RO-IAM-7", "bad/invoker-everywhere"),
        ("RO-IAM-3", "bad/invoker-everywhere"),
        ("RO-IAM-7", "bad/invoker-elsewhere"),
        # A proxy whose account may build anything in the project but not start its workflow.
        ("RO-IAM-8", "bad/proxy"),
        ("RO-IAM-8", "bad/proxy-builds-anything"),
        ("RO-IAM-3", "bad/proxy-builds-anything"),
        ("RO-IAM-5", "bad/shared-key"),
        # A Valkey instance that evicts, is not encrypted in transit, has no private endpoints, no
        # IAM authentication and waits for no API; Memorystore's connection role on the whole
        # project, to the account Scheduler signs as.
        ("RO-VAL-1", "bad/store-evicts"),
        ("RO-VAL-5", "bad/store-evicts"),
        ("RO-VAL-2", "bad/store-evicts"),
        ("RO-VAL-3", "bad/store-evicts"),
        ("RO-DEP-1", "bad/store-evicts"),
        ("RO-VAL-4", "bad/store-everywhere"),
        ("RO-IAM-3", "bad/store-everywhere"),
        ("RO-IAM-7", "bad/store-everywhere"),
        ("RO-IAM-6", "bad/open-function"),
        ("RO-NET-1", "bad/open-function"),
        ("RO-NET-2", "bad/job"),
        ("RO-STO-1", "bad/acl-bucket"),
        # A push subscription to the cloudfunctions.net URL with another audience, without a
        # dead-letter policy and with the default expiry.
        ("RO-NET-3", "bad/push"),
        ("RO-PS-1", "bad/push"),
        # A dead-lettering subscription the Pub/Sub service agent may not consume, and the agent
        # as editor of the source topic.
        ("RO-IAM-9", "bad/dead-lettering"),
        ("RO-IAM-9", "bad/agent-editor"),
        # Push subscriptions whose signer the agent may not create tokens for (only a project-level
        # token creator grant, which is too broad and does not count).
        ("RO-IAM-9", "bad/push"),
        ("RO-IAM-9", "bad/agent-token-creator"),
        ("RO-IAM-3", "bad/agent-token-creator"),
        # Scheduler jobs and push subscriptions calling a function whose service their signer may
        # not invoke, and waiting for no grant.
        ("RO-IAM-11", "bad/job"),
        ("RO-IAM-11", "bad/push"),
        ("RO-IAM-11", "bad/dead-lettering"),
        # A function's runtime account publishing into the source topic, not its dead letters.
        ("RO-IAM-10", "bad/runtime-publishes-elsewhere"),
        # A function with an Eventarc trigger created without waiting for the Eventarc agent's
        # role and its trigger account's invoker grant, nor for the Pub/Sub agent's token creator.
        ("RO-DEP-2", "bad/triggered-function"),
        ("RO-IAM-9", "bad/triggered-function"),
        # Alerts to a webhook URL holding its token; a metric labelled by run key; a log-match
        # alert without documentation or rate limit; a metric-absence alert; an alert on a
        # log-based metric created without the wait Monitoring needs to know the metric.
        ("RO-MON-1", "bad/webhook-channel"),
        ("RO-MON-2", "bad/per-run-metric"),
        ("RO-MON-3", "bad/undocumented-alert"),
        ("RO-MON-4", "bad/undocumented-alert"),
        ("RO-MON-5", "bad/absent-alert"),
        ("RO-MON-6", "bad/early-alert"),
        # Nothing in the bad stack waits for its API (project IAM needs none of its own).
        *(
            ("RO-DEP-1", f"bad/{path}")
            for path in (
                "shared-account",
                "unused-account",
                "builder-account",
                "shared-key",
                "public-invoker",
                "acl-bucket",
                "open-function",
                "job",
                "repository",
                "double-account",
                "twin-a",
                "twin-b",
                "invoker-elsewhere",
                "proxy-account",
                "proxy",
                "events-topic",
                "dead-letter-topic",
                "push",
                "dead-lettering",
                "agent-publisher",
                "agent-editor",
                "runtime-publishes-elsewhere",
                "trigger-account",
                "triggered-function",
                "webhook-channel",
                "per-run-metric",
                "undocumented-alert",
                "absent-alert",
                "early-alert",
            )
        ),
    }


def test_every_rule_of_the_pack_fires_on_the_bad_stack():
    fired = {rule_id for rule_id, _ in flagged(json.loads(BAD.read_text()))}
    assert fired == {rule.id for rule in LEAST_PRIVILEGE}


def test_the_twin_stack_passes_alone_and_clashes_with_the_bad_stack_by_name_and_state():
    twin = json.loads(TWIN.read_text())
    assert flagged(twin) == set()
    assert flagged_together({"bad": json.loads(BAD.read_text()), "bad-twin": twin}) == {
        ("RO-SET-1", "bad", "bad/acl-bucket"),
        ("RO-SET-1", "bad-twin", "bad-twin/bucket"),
        # The bad stack's repository has no project of its own: the provider's is used.
        ("RO-SET-1", "bad", "bad/repository"),
        ("RO-SET-1", "bad-twin", "bad-twin/repository"),
        ("RO-SET-2", "bad", "terraform_backend.local"),
        ("RO-SET-2", "bad-twin", "terraform_backend.local"),
    }
    assert {rule.id for rule in ACROSS_STACKS} == {"RO-SET-1", "RO-SET-2"}


def test_two_teams_deriving_the_same_names_in_one_project_are_flagged(example):
    # Testing.synth records no construct paths, so findings name the Terraform address.
    found = flagged_together({"example": example.document, "example-copy": json.loads(example.json)})
    named = {"google_service_account", "google_cloudfunctions2_function", "google_cloud_scheduler_job"}
    named |= {"google_storage_bucket", "google_artifact_registry_repository", "google_firestore_database"}
    named |= {"google_pubsub_topic", "google_pubsub_subscription"}
    expected = {
        ("RO-SET-1", stack, f"{kind}.{name}")
        for stack in ("example", "example-copy")
        for kind in named
        for name in example.resources(kind)
    }
    expected |= {("RO-SET-2", stack, "terraform_backend.local") for stack in ("example", "example-copy")}
    assert found == expected
    # Accounts: a runtime account per function (four scheduled, one event, the watchdog's) and
    # for the deployed service, and the team's build and invoker accounts; the functions; the
    # Scheduler jobs (four on functions, two on services, one on App Engine, the watchdog's); the
    # ledger and the watchdog's database; the event job's topic and dead-letter topic, its push
    # and dead-letter subscriptions.
    assert len(expected) == 2 * ((6 + 1 + 2) + 6 + 8 + 1 + 1 + 2 + 2 + 2) + 2


def test_teams_in_different_projects_may_reuse_project_scoped_names_but_not_bucket_names(example):
    moved = json.loads(example.json.replace("runonce-example", "runonce-other"))
    moved["terraform"]["backend"] = {"gcs": {"bucket": "acme-terraform-state", "prefix": "runonce/other"}}
    # The bucket name embeds the project id, so it moved too: nothing clashes.
    assert flagged_together({"example": example.document, "other": moved}) == set()
    moved["resource"]["google_storage_bucket"] = example.document["resource"]["google_storage_bucket"]
    (bucket,) = example.resources("google_storage_bucket")
    assert flagged_together({"example": example.document, "other": moved}) == {
        ("RO-SET-1", "example", f"google_storage_bucket.{bucket}"),
        ("RO-SET-1", "other", f"google_storage_bucket.{bucket}"),
    }


def test_a_scheduler_job_calling_the_cloudfunctions_url_is_flagged(example):
    stack = json.loads(example.json)
    for job in stack["resource"]["google_cloud_scheduler_job"].values():
        if "http_target" not in job:  # the App Engine job's target carries no URL
            continue
        job["http_target"]["uri"] = job["http_target"]["uri"].replace("service_config[0].uri", "url")
        job["http_target"]["oidc_token"]["audience"] = job["http_target"]["uri"]
    assert {rule for rule, _ in flagged(stack)} == {"RO-NET-2"}


def test_a_scheduler_audience_other_than_the_uri_is_flagged(example):
    stack = json.loads(example.json)
    name = next(name for name in stack["resource"]["google_cloud_scheduler_job"] if name.startswith("report"))
    stack["resource"]["google_cloud_scheduler_job"][name]["http_target"]["oidc_token"]["audience"] = (
        "https://example.com"
    )
    assert flagged(stack) == {("RO-NET-2", f"google_cloud_scheduler_job.{name}")}


def test_a_scheduler_job_without_an_oidc_token_is_flagged(example):
    stack = json.loads(example.json)
    name = next(name for name in stack["resource"]["google_cloud_scheduler_job"] if name.startswith("sync"))
    del stack["resource"]["google_cloud_scheduler_job"][name]["http_target"]["oidc_token"]
    assert flagged(stack) == {("RO-NET-2", f"google_cloud_scheduler_job.{name}")}
    for job in stack["resource"]["google_cloud_scheduler_job"].values():
        job.get("http_target", {}).pop("oidc_token", None)
    for subscription in stack["resource"]["google_pubsub_subscription"].values():
        subscription.get("push_config", {}).pop("oidc_token", None)
    # Without any job or push subscription signing as it, the team's invoker account is nobody's
    # identity (RO-IAM-4), and its grants no longer count as an invoker's.
    assert ("RO-IAM-4", "google_service_account.team-invoker-account") in flagged(stack)


def test_a_resource_without_its_api_or_without_the_wait_after_it_is_flagged(example):
    stack = json.loads(example.json)
    functions = list(stack["resource"]["google_cloudfunctions2_function"].values())
    functions[0]["depends_on"] = [d for d in functions[0]["depends_on"] if "cloudbuild" not in d]
    functions[1]["depends_on"] = [d for d in functions[1]["depends_on"] if "apis_settled" not in d]
    assert {rule for rule, _ in flagged(stack)} == {"RO-DEP-1"}
    assert len(flagged(stack)) == 2


def test_a_resource_type_whose_api_the_rule_does_not_know_is_flagged(example):
    stack = json.loads(example.json)
    stack["resource"]["google_pubsub_schema"] = {"schema": {"name": "s", "depends_on": []}}
    assert {(rule, path) for rule, path in flagged(stack)} == {("RO-DEP-1", "google_pubsub_schema.schema")}


def test_a_build_account_reading_another_regions_gcf_sources_bucket_is_flagged(example):
    stack = json.loads(example.json)
    grant = stack["resource"]["google_project_iam_member"]["team-build-gcf-source-reader"]
    # Another region's bucket does not help a function in europe-west1.
    grant["condition"]["expression"] = grant["condition"]["expression"].replace("europe-west1", "us-central1")
    assert {rule for rule, _ in flagged(stack)} == {"RO-IAM-6"}
    assert len(flagged(stack)) == len(stack["resource"]["google_cloudfunctions2_function"])


def test_functions_that_do_not_wait_for_the_gcf_sources_grant_are_flagged(example):
    stack = json.loads(example.json)
    # A grant the functions do not wait for: the build may start before it is in force.
    stack["resource"]["time_sleep"]["iam-settled"]["depends_on"].remove(
        "google_project_iam_member.team-build-gcf-source-reader"
    )
    assert {rule for rule, _ in flagged(stack)} == {"RO-IAM-6"}
    assert len(flagged(stack)) == len(stack["resource"]["google_cloudfunctions2_function"])


def test_a_project_grant_conditioned_to_a_bucket_name_prefix_is_not_one_resource(example):
    stack = json.loads(example.json)
    grants = stack["resource"]["google_project_iam_member"]
    name = "team-build-gcf-source-reader"
    # europe-west1 is a prefix of europe-west10: a bare prefix matches other regions' buckets.
    grants[name]["condition"]["expression"] = (
        'resource.name.startsWith("projects/_/buckets/gcf-v2-sources-123-europe-west1")'
    )
    assert flagged(stack) == {("RO-IAM-3", f"google_project_iam_member.{name}")}


def _function(stack: dict, job: str) -> dict:
    functions = stack["resource"]["google_cloudfunctions2_function"]
    return next(config for name, config in functions.items() if name.startswith(f"{job}-function"))


def test_two_functions_running_as_one_runtime_account_are_flagged(example):
    stack = json.loads(example.json)
    report, sync = _function(stack, "report"), _function(stack, "sync")
    sync["service_config"]["service_account_email"] = report["service_config"]["service_account_email"]
    # report's account now runs two functions, and sync's own account runs none.
    assert flagged(stack) == {
        ("RO-IAM-4", "google_service_account.report-identity-runtime-account"),
        ("RO-IAM-4", "google_service_account.sync-identity-runtime-account"),
    }


def test_the_build_account_running_a_function_is_flagged(example):
    stack = json.loads(example.json)
    report = _function(stack, "report")
    report["service_config"]["service_account_email"] = "${google_service_account.team-build-account.email}"
    assert ("RO-IAM-4", "google_service_account.team-build-account") in flagged(stack)


def _function_grant(grants: dict) -> tuple[str, dict]:
    """The first invoker grant on a function's service (the example's services have grants too)."""
    return next(
        (name, grant) for name, grant in grants.items() if "service_config[0].service" in grant["name"]
    )


def _callers_of(stack: dict, grant: dict) -> set[tuple[str, str]]:
    """RO-IAM-11 findings for the Scheduler jobs calling the service an invoker grant is on."""
    uri = grant["name"].replace("service_config[0].service", "service_config[0].uri")
    return {
        ("RO-IAM-11", f"google_cloud_scheduler_job.{name}")
        for name, job in stack["resource"]["google_cloud_scheduler_job"].items()
        if job.get("http_target", {}).get("uri") == uri
    }


def test_the_invoker_granted_run_invoker_on_the_project_is_flagged(example):
    stack = json.loads(example.json)
    grants = stack["resource"]["google_cloud_run_v2_service_iam_member"]
    name, grant = _function_grant(grants)
    callers = _callers_of(stack, grant)
    assert callers  # the jobs that called through the removed grant now wait for none
    del grants[name]
    stack["resource"]["time_sleep"]["invoker-settled"]["depends_on"].remove(
        f"google_cloud_run_v2_service_iam_member.{name}"
    )
    for job in stack["resource"]["google_cloud_scheduler_job"].values():
        job["depends_on"] = [
            d for d in job["depends_on"] if d != f"google_cloud_run_v2_service_iam_member.{name}"
        ]
    stack["resource"]["google_project_iam_member"]["invoker-everywhere"] = {
        "project": "runonce-example",
        "role": "roles/run.invoker",
        "member": grant["member"],
    }
    assert flagged(stack) == {
        ("RO-IAM-7", "google_project_iam_member.invoker-everywhere"),
        ("RO-IAM-3", "google_project_iam_member.invoker-everywhere"),
        *callers,
    }


def test_run_invoker_on_a_service_the_stack_does_not_own_is_flagged(example):
    stack = json.loads(example.json)
    grants = stack["resource"]["google_cloud_run_v2_service_iam_member"]
    name, _ = _function_grant(grants)
    callers = _callers_of(stack, grants[name])
    assert callers  # the jobs of the function whose grant moved may no longer call it
    grants[name]["name"] = "payments-settle"  # another team's service, by its name
    assert flagged(stack) == {("RO-IAM-7", f"google_cloud_run_v2_service_iam_member.{name}"), *callers}


@pytest.mark.parametrize("duration", ["60s", "1m59s", "", None])
def test_callers_waiting_less_than_two_minutes_after_the_invoker_grants_are_flagged(example, duration):
    stack = json.loads(example.json)
    settled = stack["resource"]["time_sleep"]["invoker-settled"]
    if duration is None:
        del settled["create_duration"]
    else:
        settled["create_duration"] = duration
    push, _ = _push(stack)
    assert flagged(stack) == {
        *(
            ("RO-IAM-11", f"google_cloud_scheduler_job.{n}")
            for n, job in stack["resource"]["google_cloud_scheduler_job"].items()
            if not n.startswith("watchdog_")  # it waits for its own grant (tests/stacks/test_watchdog.py)
            and "http_target" in job  # an App Engine target calls with no invoker's token
        ),
        ("RO-IAM-11", f"google_pubsub_subscription.{push}"),
    }


@pytest.mark.parametrize("kind", ["google_cloud_scheduler_job", "google_pubsub_subscription"])
def test_a_caller_created_before_its_invoker_grant_or_without_the_wait_is_flagged(example, kind):
    stack = json.loads(example.json)
    name, caller = next(
        (n, c)
        for n, c in stack["resource"][kind].items()
        if kind != "google_pubsub_subscription" or "push_config" in c
    )
    grants = [d for d in caller["depends_on"] if d.startswith("google_cloud_run_v2_service_iam_member.")]
    assert len(grants) == 1
    without_grant = json.loads(json.dumps(stack))
    without_grant["resource"][kind][name]["depends_on"].remove(grants[0])
    assert flagged(without_grant) == {("RO-IAM-11", f"{kind}.{name}")}
    caller["depends_on"].remove("time_sleep.invoker-settled")
    assert flagged(stack) == {("RO-IAM-11", f"{kind}.{name}")}


def test_two_minutes_written_in_minutes_is_enough(example):
    stack = json.loads(example.json)
    stack["resource"]["time_sleep"]["invoker-settled"]["create_duration"] = "2m"
    assert flagged(stack) == set()


def test_the_invoker_holding_any_other_role_is_flagged(example):
    stack = json.loads(example.json)
    ledger = stack["resource"]["google_project_iam_member"]["report-identity-runtime-ledger"]
    stack["resource"]["google_project_iam_member"]["invoker-reads-the-ledger"] = {
        **ledger,
        "member": "serviceAccount:${google_service_account.team-invoker-account.email}",
    }
    assert flagged(stack) == {("RO-IAM-7", "google_project_iam_member.invoker-reads-the-ledger")}


def test_a_migrating_team_passes_the_pack_with_its_retiring_accounts_and_no_others(archive_dir):
    team = replace(load_team_file(TEAMS_DIR / "example.py"), keep_per_job_accounts=True)
    migrating = synthesize(team, archive_dir)
    assert len(migrating.stack.retiring_accounts) == 8
    assert flagged(migrating.document) == set()
    stack = json.loads(migrating.json)
    for account in stack["resource"]["google_service_account"].values():
        account.pop("description", None)
    assert {rule for rule, _ in flagged(stack)} == {"RO-IAM-4"}
    assert len(flagged(stack)) == 8


def test_a_function_without_ingress_setting_counts_as_open(example):
    stack = json.loads(example.json)
    for config in stack["resource"]["google_cloudfunctions2_function"].values():
        del config["service_config"]["ingress_settings"]
    assert {rule for rule, _ in flagged(stack)} == {"RO-NET-1"}


def test_policy_command_fails_on_the_bad_stack_and_prints_resource_paths():
    completed = subprocess.run(
        [sys.executable, "-m", "policy", str(BAD)], capture_output=True, text=True, cwd=REPO_ROOT, check=False
    )
    assert completed.returncode == 1
    assert "ERROR RO-IAM-1 [bad] bad/owner (google_project_iam_member.owner)" in completed.stdout


def test_policy_command_checks_the_stacks_it_is_given_together():
    completed = subprocess.run(
        [sys.executable, "-m", "policy", str(BAD), str(TWIN)],
        capture_output=True,
        text=True,
        cwd=REPO_ROOT,
        check=False,
    )
    assert completed.returncode == 1
    assert (
        "ERROR RO-SET-1 [bad-twin] bad-twin/bucket (google_storage_bucket.bucket): no_shared_resource_names "
        "(google_storage_bucket runonce-bad-sources is also used by bad)." in completed.stdout
    )
    assert (
        "ERROR RO-SET-2 [bad] terraform_backend.local (terraform_backend.local): no_shared_state "
        "(state local ../../../terraform.bad.tfstate is also used by bad-twin)." in completed.stdout
    )


def test_every_checkov_skip_says_why():
    assert all(len(reason) > 40 for reason in SKIPPED.values())


@needs_checkov
def test_checkov_finds_nothing_on_the_example_teams(example, payments, tmp_path):
    for synth in (example, payments):
        file = tmp_path / f"{synth.team.name}.tf.json"
        file.write_text(synth.json)
        assert run_checkov(CHECKOV, synth.team.name, file) == []


@needs_checkov
def test_checkov_fails_the_bad_stack():
    failed = {failure.check_id for failure in run_checkov(CHECKOV, "bad", BAD)}
    assert {"CKV_GCP_117", "CKV_GCP_124", "CKV_GCP_29", "CKV_GCP_114"} <= failed


def test_two_teams_with_the_same_gcs_state_prefix_are_flagged(example, payments):
    shared = {"gcs": {"bucket": "acme-terraform-state", "prefix": "runonce/orders"}}
    first, second = json.loads(example.json), json.loads(payments.json)
    first["terraform"]["backend"] = second["terraform"]["backend"] = shared
    findings = check_stack_set({"example": first, "payments": second})
    assert {(finding.rule.id, finding.stack, finding.detail) for finding in findings} == {
        ("RO-SET-2", "example", "state gs://acme-terraform-state/runonce/orders is also used by payments"),
        ("RO-SET-2", "payments", "state gs://acme-terraform-state/runonce/orders is also used by example"),
    }
    second["terraform"]["backend"] = {"gcs": {"bucket": "acme-terraform-state", "prefix": "runonce/payments"}}
    assert check_stack_set({"example": first, "payments": second}) == []


def _push(stack: dict) -> tuple[str, dict]:
    """The example's one push subscription: its name and config."""
    ((name, config),) = [
        (name, config)
        for name, config in stack["resource"]["google_pubsub_subscription"].items()
        if "push_config" in config
    ]
    return name, config


def _pubsub_grant(stack: dict, kind: str, member_part: str) -> tuple[str, dict]:
    ((name, config),) = [
        (name, config) for name, config in stack["resource"][kind].items() if member_part in config["member"]
    ]
    return name, config


def test_the_example_event_job_passes_the_pubsub_rules(example):
    fired = {rule for rule, path in flagged(example.document)}
    assert fired == set()
    ids = {rule.id for rule in LEAST_PRIVILEGE}
    assert {"RO-NET-3", "RO-PS-1", "RO-IAM-9", "RO-IAM-10"} <= ids


def _token_creator(stack: dict) -> tuple[str, dict]:
    """The example's one grant of token creator to the Pub/Sub service agent."""
    ((name, config),) = stack["resource"]["google_service_account_iam_member"].items()
    return name, config


def _unwaited_token_creator(example, delete: bool) -> tuple[dict, str, dict, dict]:
    """The example stack with nothing depending on the agent's token creator grant (deleted
    too, if `delete`): the stack, the push subscription's name and config, and the grant."""
    stack = json.loads(example.json)
    push, config = _push(stack)
    name, grant = _token_creator(stack)
    for waiting in (config, stack["resource"]["time_sleep"]["invoker-settled"]):
        waiting["depends_on"].remove(f"google_service_account_iam_member.{name}")
    if delete:
        del stack["resource"]["google_service_account_iam_member"]
    return stack, push, config, grant


@pytest.mark.parametrize("delete", [True, False], ids=["no-grant", "grant-not-waited-for"])
def test_a_push_subscription_without_the_agents_token_creator_grant_before_it_is_flagged(example, delete):
    stack, push, _, _ = _unwaited_token_creator(example, delete)
    assert flagged(stack) == {("RO-IAM-9", f"google_pubsub_subscription.{push}")}


def test_token_creator_for_the_agent_on_the_project_instead_of_the_signer_is_flagged(example):
    stack, push, config, grant = _unwaited_token_creator(example, delete=True)
    stack["resource"]["google_project_iam_member"]["agent-tokens"] = {
        "project": "runonce-example",
        "role": grant["role"],
        "member": grant["member"],
    }
    config["depends_on"].append("google_project_iam_member.agent-tokens")
    assert flagged(stack) == {
        ("RO-IAM-9", f"google_pubsub_subscription.{push}"),
        ("RO-IAM-9", "google_project_iam_member.agent-tokens"),
        ("RO-IAM-3", "google_project_iam_member.agent-tokens"),
    }


def test_token_creator_for_the_agent_on_an_account_no_push_signs_as_is_flagged(example):
    stack = json.loads(example.json)
    _, grant = _token_creator(stack)
    build = "team-build-account"
    assert build in stack["resource"]["google_service_account"]
    stack["resource"]["google_service_account_iam_member"]["agent-signs-builds"] = {
        **grant,
        "service_account_id": f"${{google_service_account.{build}.name}}",
    }
    assert flagged(stack) == {("RO-IAM-9", "google_service_account_iam_member.agent-signs-builds")}


def test_a_push_subscription_with_another_audience_is_flagged(example):
    stack = json.loads(example.json)
    name, push = _push(stack)
    push["push_config"]["oidc_token"]["audience"] = "https://example.com"
    assert flagged(stack) == {("RO-NET-3", f"google_pubsub_subscription.{name}")}


def test_a_push_subscription_to_the_cloudfunctions_url_is_flagged(example):
    stack = json.loads(example.json)
    name, push = _push(stack)
    url = push["push_config"]["push_endpoint"].replace("service_config[0].uri", "url")
    push["push_config"]["push_endpoint"] = push["push_config"]["oidc_token"]["audience"] = url
    assert flagged(stack) == {("RO-NET-3", f"google_pubsub_subscription.{name}")}


@pytest.mark.parametrize(
    "change",
    [
        lambda push: push.pop("expiration_policy"),
        lambda push: push["dead_letter_policy"].update(max_delivery_attempts=4),
        lambda push: push["dead_letter_policy"].update(max_delivery_attempts=101),
    ],
    ids=["expires", "too-few-attempts", "too-many-attempts"],
)
def test_a_push_subscription_that_expires_or_dead_letters_out_of_range_is_flagged(example, change):
    stack = json.loads(example.json)
    name, push = _push(stack)
    change(push)
    assert flagged(stack) == {("RO-PS-1", f"google_pubsub_subscription.{name}")}


def test_a_push_subscription_without_dead_letter_policy_is_flagged_with_the_grants_it_no_longer_needs(
    example,
):
    stack = json.loads(example.json)
    name, push = _push(stack)
    del push["dead_letter_policy"]
    agent_publisher, _ = _pubsub_grant(stack, "google_pubsub_topic_iam_member", "pubsub-agent")
    agent_subscriber, _ = _pubsub_grant(stack, "google_pubsub_subscription_iam_member", "pubsub-agent")
    # The runtime account still publishes only to the topic its function's
    # RUNONCE_DEAD_LETTER_TOPIC names, which is not flagged.
    assert flagged(stack) == {
        ("RO-PS-1", f"google_pubsub_subscription.{name}"),
        ("RO-IAM-9", f"google_pubsub_topic_iam_member.{agent_publisher}"),
        ("RO-IAM-9", f"google_pubsub_subscription_iam_member.{agent_subscriber}"),
    }


def test_a_service_agent_without_subscriber_on_the_push_subscription_is_flagged(example):
    stack = json.loads(example.json)
    name, _ = _push(stack)
    del stack["resource"]["google_pubsub_subscription_iam_member"]
    assert flagged(stack) == {("RO-IAM-9", f"google_pubsub_subscription.{name}")}


def test_a_service_agent_with_another_role_on_the_dead_letter_topic_is_flagged(example):
    stack = json.loads(example.json)
    name, grant = _pubsub_grant(stack, "google_pubsub_topic_iam_member", "pubsub-agent")
    grant["role"] = "roles/pubsub.editor"
    push, _ = _push(stack)
    # The editor grant is more than needed, and the publisher grant dead-lettering needs is gone.
    assert flagged(stack) == {
        ("RO-IAM-9", f"google_pubsub_topic_iam_member.{name}"),
        ("RO-IAM-9", f"google_pubsub_subscription.{push}"),
    }


def test_a_runtime_account_publishing_to_the_source_topic_is_flagged(example):
    stack = json.loads(example.json)
    name, grant = _pubsub_grant(stack, "google_pubsub_topic_iam_member", "orders-identity-runtime-account")
    source = next(topic for topic in stack["resource"]["google_pubsub_topic"] if "dead-letter" not in topic)
    grant["topic"] = f"${{google_pubsub_topic.{source}.name}}"
    assert flagged(stack) == {("RO-IAM-10", f"google_pubsub_topic_iam_member.{name}")}


def test_a_runtime_account_consuming_a_subscription_is_flagged(example):
    stack = json.loads(example.json)
    push, _ = _push(stack)
    _, grant = _pubsub_grant(stack, "google_pubsub_topic_iam_member", "orders-identity-runtime-account")
    stack["resource"]["google_pubsub_subscription_iam_member"]["runtime-reads"] = {
        "subscription": f"${{google_pubsub_subscription.{push}.name}}",
        "role": "roles/pubsub.subscriber",
        "member": grant["member"],
        "depends_on": grant["depends_on"],
    }
    assert flagged(stack) == {("RO-IAM-10", "google_pubsub_subscription_iam_member.runtime-reads")}
