"""The first apply on a fresh project, for every feature: the team in
tests/stacks/fixtures/every_feature.py (GCS state, a job of each target kind, a push event job, an
Eventarc job on a bucket and one on a topic, the migration's kept accounts), its synthesized JSON
read against the provider's examples and Google's pages (docs/stacks.md, "First deploy"), and the
validation rules that keep its retries and event ages inside what Pub/Sub and Eventarc keep."""

from __future__ import annotations

import copy
import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from policy.runner import check_stack
from stacks.config.targets import BuildTrigger
from stacks.team import EventJob, PushRetry, Team, load_team_file
from stacks.validate import find_problems
from tests.stacks.conftest import Synthesized, synthesize

EVERY_FEATURE = Path(__file__).parent / "fixtures" / "every_feature.py"


@pytest.fixture(scope="module")
def every(archive_dir) -> Synthesized:
    """The every-feature team, validated and synthesized."""
    team = load_team_file(EVERY_FEATURE)
    assert find_problems([team]) == []
    return synthesize(team, archive_dir)


def _named(synth: Synthesized | dict[str, Any], kind: str, **wanted) -> tuple[str, dict[str, Any]]:
    """The one resource of `kind` whose settings include `wanted`."""
    document = synth if isinstance(synth, dict) else synth.document
    found = [
        (name, config)
        for name, config in document["resource"].get(kind, {}).items()
        if all(config.get(key) == value for key, value in wanted.items())
    ]
    assert len(found) == 1, found
    return found[0]


def _findings(document: dict[str, Any]) -> list[str]:
    return sorted(
        f"{finding.rule.id} {finding.resource.address}" for finding in check_stack("every", document)
    )


def test_the_every_feature_stack_passes_the_pack(every):
    assert _findings(every.document) == []


PUSH_JOB = EventJob(name="orders", source="orders_events", timeout_seconds=60)
TEAM = Team(
    name="acme",
    project="acme-prod-1",
    region="europe-west1",
    jobs=[],
    event_jobs=[PUSH_JOB],
    alert_emails=["oncall@example.com"],
)


def problems(**changes) -> list:
    return find_problems([replace(TEAM, event_jobs=[replace(PUSH_JOB, **changes)])])


def test_push_attempts_that_all_come_within_a_crashed_attempts_lease_are_refused():
    # Lease 120 s; 5 attempts 10 s apart end 40 s after the first: all meet the held claim.
    (problem,) = problems(max_delivery_attempts=5)
    assert (problem.job, problem.field) == ("orders", "max_delivery_attempts")
    assert "409" in problem.message and "40 s after the first" in problem.message
    assert "raise max_delivery_attempts to 14" in problem.fix
    assert "raise retry.min_backoff_seconds to 31" in problem.fix


def test_the_suggested_fixes_reach_past_the_lease():
    assert problems(max_delivery_attempts=14) == []
    assert problems(max_delivery_attempts=5, retry=PushRetry(min_backoff_seconds=31)) == []


def test_a_zero_minimum_backoff_never_reaches_past_the_lease():
    (problem,) = problems(retry=PushRetry(min_backoff_seconds=0))
    assert problem.field == "max_delivery_attempts" and "max_delivery_attempts to" not in problem.fix


def test_the_push_defaults_reach_past_the_default_lease():
    job = EventJob(name="orders", source="orders_events")
    offsets = job.retry.attempt_offsets_seconds(job.max_delivery_attempts)
    assert offsets[-1] > job.lease_seconds
    assert find_problems([replace(TEAM, event_jobs=[job])]) == []


def test_the_backoff_model_takes_every_wait_as_the_minimum():
    assert PushRetry(min_backoff_seconds=10, max_backoff_seconds=600).attempt_offsets_seconds(5) == [
        0,
        10,
        20,
        30,
        40,
    ]


EVENTARC_JOB = replace(PUSH_JOB, name="uploads", trigger="eventarc", bucket="acme-uploads")


@pytest.mark.parametrize("age", [24 * 3600, 23 * 3600 + 1])
def test_an_eventarc_jobs_event_age_must_be_well_under_eventarcs_24_hours(age):
    (problem,) = find_problems([replace(TEAM, event_jobs=[replace(EVENTARC_JOB, max_event_age_seconds=age)])])
    assert (problem.job, problem.field) == ("uploads", "max_event_age_seconds")
    assert "24 hours" in problem.message and "82800" in problem.fix


def test_the_default_event_age_suits_an_eventarc_job():
    assert find_problems([replace(TEAM, event_jobs=[EVENTARC_JOB])]) == []


def test_a_push_job_may_keep_events_a_day_when_its_retry_window_is_longer():
    assert problems(max_event_age_seconds=24 * 3600, max_delivery_attempts=14) == []


RELEASE_ACCOUNT = "release-builder@acme-every-1.iam.gserviceaccount.com"


def test_a_build_trigger_proxy_may_act_as_the_trigger_account_alone(every):
    _, proxy = _named(every, "google_cloudfunctions2_function", name="every-release")
    name, grant = _named(every, "google_service_account_iam_member", role="roles/iam.serviceAccountUser")
    assert grant["service_account_id"] == f"projects/acme-every-1/serviceAccounts/{RELEASE_ACCOUNT}"
    assert grant["member"] == f"serviceAccount:{proxy['service_config']['service_account_email']}"
    assert (
        f"google_service_account_iam_member.{name}"
        in every.resources("time_sleep")["iam-settled"]["depends_on"]
    )
    project_roles = {config["role"] for config in every.resources("google_project_iam_member").values()}
    assert "roles/iam.serviceAccountUser" not in project_roles


@pytest.mark.parametrize(
    "account",
    [
        f"projects/acme-every-1/serviceAccounts/{RELEASE_ACCOUNT}",
        "release-builder",
        "Release@acme-every-1.iam.gserviceaccount.com",
    ],
)
def test_a_trigger_account_must_be_a_user_managed_accounts_email(account):
    team = load_team_file(EVERY_FEATURE)
    release = next(job for job in team.jobs if job.name == "release")
    assert isinstance(release.target, BuildTrigger)
    changed = replace(release, target=replace(release.target, service_account=account))
    found = find_problems([replace(team, jobs=[changed])])
    assert [(problem.job, problem.field) for problem in found] == [("release", "target.service_account")]
    assert "NAME@PROJECT.iam.gserviceaccount.com" in found[0].fix


def test_a_proxy_without_actas_on_its_trigger_account_is_flagged(every):
    stack = copy.deepcopy(every.document)
    name, _ = _named(stack, "google_service_account_iam_member", role="roles/iam.serviceAccountUser")
    del stack["resource"]["google_service_account_iam_member"][name]
    function, _ = _named(stack, "google_cloudfunctions2_function", name="every-release")
    assert _findings(stack) == [f"RO-IAM-8 google_cloudfunctions2_function.{function}"]


def test_actas_on_any_other_account_is_flagged(every):
    stack = copy.deepcopy(every.document)
    name, grant = _named(stack, "google_service_account_iam_member", role="roles/iam.serviceAccountUser")
    grant["service_account_id"] = (
        "projects/acme-every-1/serviceAccounts/deployer@acme-every-1.iam.gserviceaccount.com"
    )
    function, _ = _named(stack, "google_cloudfunctions2_function", name="every-release")
    assert _findings(stack) == [
        f"RO-IAM-8 google_cloudfunctions2_function.{function}",
        f"RO-IAM-8 google_service_account_iam_member.{name}",
    ]


STORAGE_AGENT = "${data.google_storage_project_service_account.storage-agent.member}"


def test_the_storage_agent_comes_from_its_data_source_not_an_interpolated_email(every):
    (source,) = every.document["data"]["google_storage_project_service_account"].values()
    assert source["project"] == "acme-every-1"
    assert "google_project_service.apis_storage" in " ".join(source["depends_on"])
    publishers = [
        config["member"]
        for config in every.resources("google_project_iam_member").values()
        if config["role"] == "roles/pubsub.publisher" and "runtime-account" not in config["member"]
    ]
    assert publishers == [STORAGE_AGENT]
    assert "gs-project-accounts" not in every.json


def test_an_interpolated_storage_agent_is_not_accepted_at_project_level(every):
    stack = copy.deepcopy(every.document)
    name, grant = _named(stack, "google_project_iam_member", member=STORAGE_AGENT)
    grant["member"] = (
        "serviceAccount:service-${data.google_project.project.number}@gs-project-accounts.iam.gserviceaccount.com"
    )
    assert f"RO-IAM-3 google_project_iam_member.{name}" in _findings(stack)


def test_a_bucket_trigger_is_in_its_buckets_location(every):
    _, function = _named(every, "google_cloudfunctions2_function", name="every-uploads")
    assert function["event_trigger"]["trigger_region"] == "eu"
    _, topic_function = _named(every, "google_cloudfunctions2_function", name="every-paid")
    assert topic_function["event_trigger"]["trigger_region"] == "europe-west1"


@pytest.mark.parametrize(
    ("changes", "fix"),
    [
        ({"bucket_location": "EU"}, "write it in lower case, 'eu'"),
        ({"bucket_location": "europe-west-1"}, "'europe-west1'"),
        ({"bucket_location": "eu", "bucket": "", "topic": "orders-paid"}, "remove bucket_location="),
        ({"bucket_location": "eu", "trigger": "push", "bucket": ""}, "remove bucket_location="),
    ],
)
def test_a_trigger_location_must_be_its_buckets(changes, fix):
    (problem,) = find_problems([replace(TEAM, event_jobs=[replace(EVENTARC_JOB, **changes)])])
    assert (problem.job, problem.field) == ("uploads", "bucket_location") and fix in problem.fix


@pytest.mark.parametrize("location", ["eu", "nam4", "us", "asia1", "europe-west4"])
def test_a_bucket_may_be_in_a_region_or_a_dual_or_multi_region(location):
    assert find_problems([replace(TEAM, event_jobs=[replace(EVENTARC_JOB, bucket_location=location)])]) == []


def test_the_eventarc_agent_is_created_through_google_beta_once_eventarc_is_on(every):
    document = every.document
    assert document["terraform"]["required_providers"]["google-beta"] == {
        "source": "hashicorp/google-beta",
        "version": "6.50.0",
    }
    assert document["provider"]["google-beta"] == [{"project": "acme-every-1", "region": "europe-west1"}]
    agent = every.resources("google_project_service_identity")["eventarc-agent"]
    assert (agent["provider"], agent["project"], agent["service"]) == (
        "google-beta",
        "acme-every-1",
        "eventarc.googleapis.com",
    )
    assert any(address.startswith("google_project_service.apis_eventarc") for address in agent["depends_on"])
    role = every.resources("google_project_iam_member")["eventarc-agent-role"]
    assert (role["role"], role["member"]) == (
        "roles/eventarc.serviceAgent",
        "${google_project_service_identity.eventarc-agent.member}",
    )


def test_a_team_without_event_jobs_declares_no_beta_provider(payments):
    assert "google-beta" not in payments.document["terraform"]["required_providers"]
    assert "google_project_service_identity" not in payments.document["resource"]


def test_a_team_with_push_jobs_only_provisions_the_pubsub_agent_alone(example):
    agents = example.resources("google_project_service_identity")
    assert {name: config["service"] for name, config in agents.items()} == {
        "pubsub-agent": "pubsub.googleapis.com"
    }


@pytest.mark.parametrize("job", ["uploads", "paid"])
def test_a_triggered_function_waits_for_the_agents_role_and_its_invoker_grant(every, job):
    _, function = _named(every, "google_cloudfunctions2_function", name=f"every-{job}")
    signer = function["event_trigger"]["service_account_email"]
    invoker, _ = _named(
        every, "google_project_iam_member", role="roles/run.invoker", member=f"serviceAccount:{signer}"
    )
    settled = every.resources("time_sleep")["trigger-settled"]
    assert "time_sleep.trigger-settled" in function["depends_on"]
    assert settled["create_duration"] == "120s"
    assert {
        f"google_project_iam_member.{invoker}",
        "google_project_iam_member.eventarc-agent-role",
    } <= set(settled["depends_on"])


def test_a_trigger_accounts_invoker_grant_does_not_wait_for_its_function(every):
    service_grants = every.resources("google_cloud_run_v2_service_iam_member").values()
    assert not any(
        "trg" in config["member"] or "trigger-account" in config["member"] for config in service_grants
    )
    for name, grant in every.resources("google_project_iam_member").items():
        if grant["role"] == "roles/run.invoker":
            assert "cloudfunctions2_function" not in str(grant), name


def _triggered(stack: dict[str, Any]) -> str:
    name, _ = _named(stack, "google_cloudfunctions2_function", name="every-uploads")
    return f"RO-DEP-2 google_cloudfunctions2_function.{name}"


@pytest.mark.parametrize(
    "breaks",
    [
        lambda stack, function: function["depends_on"].remove("time_sleep.trigger-settled"),
        lambda stack, function: stack["resource"]["time_sleep"]["trigger-settled"].update(
            create_duration="60s"
        ),
        lambda stack, function: stack["resource"]["time_sleep"]["trigger-settled"]["depends_on"].remove(
            "google_project_iam_member.eventarc-agent-role"
        ),
    ],
    ids=["no-wait", "short-wait", "agent-role-not-waited-for"],
)
def test_a_triggered_function_that_does_not_wait_is_flagged(every, breaks):
    stack = copy.deepcopy(every.document)
    _, function = _named(stack, "google_cloudfunctions2_function", name="every-uploads")
    breaks(stack, function)
    assert _triggered(stack) in _findings(stack)


def test_a_project_invoker_grant_for_an_account_no_trigger_delivers_as_is_flagged(every):
    stack = copy.deepcopy(every.document)
    (name,) = [
        name
        for name, config in stack["resource"]["google_project_iam_member"].items()
        if config["role"] == "roles/run.invoker" and "uploads" in config["member"]
    ]
    grant = stack["resource"]["google_project_iam_member"][name]
    grant["member"] = "serviceAccount:${google_service_account.team-invoker-account.email}"
    found = _findings(stack)
    assert f"RO-IAM-7 google_project_iam_member.{name}" in found
    assert f"RO-IAM-3 google_project_iam_member.{name}" in found


CHECKOV = Path(__file__).parents[2] / ".venv" / "checkov" / "bin" / "checkov"


@pytest.mark.skipif(
    not CHECKOV.exists(), reason=f"checkov is not installed at {CHECKOV}: `make test` installs it"
)
def test_checkov_passes_the_every_feature_stack(every, tmp_path):
    from policy.checkov import run_checkov

    file = tmp_path / "every.tf.json"
    file.write_text(every.json)
    assert run_checkov(CHECKOV, "every", file) == []


@pytest.mark.skipif(
    not CHECKOV.exists(), reason=f"checkov is not installed at {CHECKOV}: `make test` installs it"
)
def test_checkov_accepts_the_eventarc_agents_role_for_that_agent_only(every, tmp_path):
    from policy.checkov import run_checkov

    stack = copy.deepcopy(every.document)
    grants = stack["resource"]["google_project_iam_member"]
    grants["agent-role-elsewhere"] = {**grants["eventarc-agent-role"], "member": "user:someone@example.com"}
    file = tmp_path / "every.tf.json"
    file.write_text(json.dumps(stack))
    assert [(f.check_id, f.resource) for f in run_checkov(CHECKOV, "every", file)] == [
        ("CKV_GCP_49", "resource.agent-role-elsewhere")
    ]


def test_only_a_bucket_triggers_account_may_receive_events(every):
    receivers = [
        config["member"]
        for config in every.resources("google_project_iam_member").values()
        if config["role"] == "roles/eventarc.eventReceiver"
    ]
    _, uploads = _named(every, "google_cloudfunctions2_function", name="every-uploads")
    assert receivers == [f"serviceAccount:{uploads['event_trigger']['service_account_email']}"]


def test_event_receiver_for_a_pubsub_triggers_account_is_flagged(every):
    stack = copy.deepcopy(every.document)
    _, paid = _named(stack, "google_cloudfunctions2_function", name="every-paid")
    stack["resource"]["google_project_iam_member"]["paid-receiver"] = {
        "project": "acme-every-1",
        "role": "roles/eventarc.eventReceiver",
        "member": f"serviceAccount:{paid['event_trigger']['service_account_email']}",
    }
    assert _findings(stack) == ["RO-IAM-3 google_project_iam_member.paid-receiver"]


def test_a_retry_window_that_may_end_before_a_redelivery_after_the_lease_is_refused():
    # Lease 660 s (timeout 600) and a 600 s retention: Pub/Sub drops the event before the lease ends.
    (problem,) = problems(
        timeout_seconds=600, retry_window_seconds=600, max_event_age_seconds=600, max_delivery_attempts=100
    )
    assert (problem.field, problem.job) == ("retry_window_seconds", "orders")
    assert "set retry_window_seconds above 1260" in problem.fix


def test_a_retry_window_past_the_lease_and_one_maximum_backoff_is_accepted():
    assert problems(retry_window_seconds=721, max_event_age_seconds=600) == []
    (problem,) = problems(retry_window_seconds=720, max_event_age_seconds=600)
    assert problem.field == "retry_window_seconds"


def test_a_bucket_triggers_bucket_is_checked_for_its_project_and_location_before_the_trigger(every):
    (name, bucket), *others = every.document["data"]["google_storage_bucket"].items()
    assert others == [] and (bucket["name"], bucket["project"]) == ("acme-every-uploads", "acme-every-1")
    conditions = [check["condition"] for check in bucket["lifecycle"]["postcondition"]]
    assert conditions == [
        "${tostring(self.project_number) == data.google_project.project.number}",
        '${lower(self.location) == "eu"}',
    ]
    assert all(
        "acme-every-uploads" in check["error_message"] for check in bucket["lifecycle"]["postcondition"]
    )
    assert (
        f"data.google_storage_bucket.{name}" in every.resources("time_sleep")["trigger-settled"]["depends_on"]
    )
