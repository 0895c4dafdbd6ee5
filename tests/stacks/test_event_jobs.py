"""Event jobs: what a team file may say about one (validation), and what the stack builds for it."""

from __future__ import annotations

from dataclasses import replace

import pytest
from cdktf import Testing as CdktfTesting

from stacks.config import defaults
from stacks.config.team_files import read_team_file
from stacks.team import EventJob, Job, PushRetry, Team
from stacks.validate import find_problems
from stacks.validate.quotas import usage
from tests.stacks.conftest import synthesize

GOOD_EVENT_JOB = EventJob(name="orders", source="orders_events", timeout_seconds=60)
GOOD_TEAM = Team(
    name="acme",
    project="acme-prod-1",
    region="europe-west1",
    jobs=[],
    event_jobs=[GOOD_EVENT_JOB],
    alert_emails=["oncall@example.com"],
)


def problems_of(**changes) -> list[tuple[str | None, str]]:
    """(job, field) of every problem of a team whose only job is the good event job, changed."""
    team = replace(GOOD_TEAM, event_jobs=[replace(GOOD_EVENT_JOB, **changes)])
    return [(problem.job, problem.field) for problem in find_problems([team])]


def only_message(**changes) -> str:
    team = replace(GOOD_TEAM, event_jobs=[replace(GOOD_EVENT_JOB, **changes)])
    (problem,) = find_problems([team])
    return str(problem)


def test_a_team_with_only_an_event_job_is_valid():
    assert find_problems([GOOD_TEAM]) == []


def test_the_event_job_defaults_are_valid():
    assert problems_of(timeout_seconds=EventJob.timeout_seconds) == []


@pytest.mark.parametrize("timeout", [9, 601, 3600])
def test_the_timeout_must_fit_a_push_ack_deadline(timeout):
    assert problems_of(timeout_seconds=timeout) == [("orders", "timeout_seconds")]


def test_the_timeout_message_says_the_ack_deadline_is_derived_from_it():
    message = only_message(timeout_seconds=900)
    assert "ack deadline" in message and "10-600" in message


@pytest.mark.parametrize(
    ("retry", "field"),
    [
        (PushRetry(min_backoff_seconds=-1), "retry.min_backoff_seconds"),
        (PushRetry(max_backoff_seconds=601), "retry.max_backoff_seconds"),
        (PushRetry(min_backoff_seconds=60, max_backoff_seconds=30), "retry.min_backoff_seconds"),
    ],
)
def test_backoff_stays_in_pubsubs_range(retry, field):
    assert problems_of(retry=retry) == [("orders", field)]


@pytest.mark.parametrize("window", [599, 7 * 24 * 3600 + 1])
def test_the_retry_window_is_ten_minutes_to_seven_days(window):
    assert problems_of(retry_window_seconds=window, max_event_age_seconds=300) == [
        ("orders", "retry_window_seconds")
    ]


@pytest.mark.parametrize("attempts", [4, 101])
def test_delivery_attempts_are_five_to_a_hundred(attempts):
    assert problems_of(max_delivery_attempts=attempts) == [("orders", "max_delivery_attempts")]


@pytest.mark.parametrize(
    ("changes", "message", "fix"),
    [
        (
            {"retry": PushRetry(max_backoff_seconds=601)},
            "601 s is outside Pub/Sub's backoff range 0-600 s",
            "choose 0-600",
        ),
        (
            {"retry_window_seconds": 599, "max_event_age_seconds": 300},
            "599 s is outside Pub/Sub's message retention range 600-604800 s (10 minutes to 7 days)",
            "choose 600-604800",
        ),
        ({"max_delivery_attempts": 101}, "101 is outside Pub/Sub's dead-letter range 5-100", "choose 5-100"),
    ],
)
def test_a_setting_outside_pubsubs_range_names_the_range_and_its_unit(changes, message, fix):
    team = replace(GOOD_TEAM, event_jobs=[replace(GOOD_EVENT_JOB, **changes)])
    (problem,) = find_problems([team])
    assert (problem.message, problem.fix) == (message, fix)


def test_the_maximum_event_age_may_not_exceed_the_retry_window():
    assert problems_of(retry_window_seconds=3600, max_event_age_seconds=3601) == [
        ("orders", "max_event_age_seconds")
    ]
    assert "vanish" in only_message(retry_window_seconds=3600, max_event_age_seconds=3601)


def test_the_ledger_retention_must_outlast_the_retry_window():
    assert problems_of(retention_seconds=EventJob.retry_window_seconds) == [("orders", "retention_seconds")]
    assert problems_of(retry_window_seconds=3600, max_event_age_seconds=600, retention_seconds=3601) == []


def test_a_lease_not_longer_than_the_ack_deadline_is_refused():
    assert problems_of(env={"RUNONCE_LEASE_SECONDS": "60"}) == [("orders", "env")]
    assert problems_of(env={"RUNONCE_LEASE_SECONDS": "61"}) == []


@pytest.mark.parametrize(
    "name", ["RUNONCE_MAX_EVENT_AGE_SECONDS", "RUNONCE_DEAD_LETTER_TOPIC", "RUNONCE_JOB"]
)
def test_the_event_variables_are_set_by_the_stack_only(name):
    assert problems_of(env={name: "x"}) == [("orders", "env")]


def test_a_topic_must_be_an_id_not_a_path():
    assert problems_of(topic="projects/acme-prod-1/topics/orders") == [("orders", "topic")]
    assert problems_of(topic="orders-paid") == []


def test_an_event_job_and_a_scheduled_job_may_not_share_a_name():
    scheduled = Job(name="orders", schedule="0 3 * * *", source="report", attempt_deadline_seconds=180)
    team = replace(GOOD_TEAM, jobs=[scheduled])
    assert [(p.job, p.field) for p in find_problems([team])] == [("orders", "name")]


EVENT_HANDLER = """
import functions_framework
from google.cloud import firestore
from runonce import {decorator}

@functions_framework.http
@{decorator}
def handle(event):
    return {{}}
"""
REQUIREMENTS = "functions-framework==3.10.2\ngoogle-cloud-firestore==2.34.1\n"


def event_folder(
    tmp_path, decorator: str = "deduplicated_event", extra: str = "google-cloud-pubsub==2.44.0\n"
) -> str:
    folder = tmp_path / "events"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "main.py").write_text(EVENT_HANDLER.format(decorator=decorator))
    (folder / "requirements.txt").write_text(REQUIREMENTS + extra)
    return str(folder)


def test_an_event_handler_in_its_own_folder_is_accepted(tmp_path):
    assert problems_of(source=event_folder(tmp_path)) == []


def test_a_scheduled_handler_cannot_serve_an_event_job(tmp_path):
    problems = problems_of(source=event_folder(tmp_path, decorator="deduplicated"))
    assert problems == [("orders", "entry_point")]
    assert "deduplicated_event" in only_message(source=event_folder(tmp_path, decorator="deduplicated"))


def test_an_event_handler_must_list_google_cloud_pubsub(tmp_path):
    source = event_folder(tmp_path, extra="")
    assert problems_of(source=source) == [("orders", "source")]
    assert "google-cloud-pubsub" in only_message(source=source)


def test_a_misspelt_event_job_field_is_named(tmp_path):
    path = tmp_path / "acme.py"
    path.write_text(
        "from stacks.team import EventJob, Team\n"
        "team = Team(name='acme', project='acme-prod-1', region='europe-west1', jobs=[],\n"
        "    event_jobs=[EventJob(name='orders', source='orders_events', max_delivery_atempts=5)])\n"
    )
    _, problems = read_team_file(path)
    assert [(p.job, p.field) for p in problems] == [("orders", "max_delivery_atempts")]
    assert "max_delivery_attempts" in problems[0].fix


def test_an_event_job_of_the_wrong_type_is_named(tmp_path):
    path = tmp_path / "acme.py"
    path.write_text(
        "from stacks.team import EventJob, PushRetry, Team\n"
        "team = Team(name='acme', project='acme-prod-1', region='europe-west1', jobs=[],\n"
        "    event_jobs=[EventJob(name='orders', source='orders_events',\n"
        "                         retry=PushRetry(min_backoff_seconds='10'))])\n"
    )
    _, problems = read_team_file(path)
    assert [(p.job, p.field) for p in problems] == [("orders", "retry.min_backoff_seconds")]


# ---- what the stack builds ----


@pytest.fixture(scope="module")
def events(archive_dir):
    """A team with the good event job on a topic it names, and the example's defaults otherwise."""
    job = replace(GOOD_EVENT_JOB, topic="orders-paid", max_delivery_attempts=7)
    return synthesize(replace(GOOD_TEAM, event_jobs=[job]), archive_dir)


def _one(synth, kind: str, **match) -> tuple[str, dict]:
    found = [(name, c) for name, c in synth.resources(kind).items() if match.items() <= c.items()]
    assert len(found) == 1, f"expected one {kind} matching {match}"
    return found[0]


def test_the_push_subscription_calls_the_run_app_uri_with_the_invokers_token(events):
    function, _ = _one(events, "google_cloudfunctions2_function", name="acme-orders")
    uri = f"${{google_cloudfunctions2_function.{function}.service_config[0].uri}}"
    assert CdktfTesting.to_have_resource_with_properties(
        events.json,
        "google_pubsub_subscription",
        {
            "name": "acme-orders-push",
            "topic": "projects/acme-prod-1/topics/orders-paid",
            "ack_deadline_seconds": 60,
            "message_retention_duration": "604800s",
            "retry_policy": {"minimum_backoff": "10s", "maximum_backoff": "600s"},
            "expiration_policy": {"ttl": ""},
            "push_config": {
                "push_endpoint": uri,
                "oidc_token": {
                    "service_account_email": "${google_service_account.team-invoker-account.email}",
                    "audience": uri,
                },
            },
        },
    )


def test_an_existing_topic_is_not_created(events):
    topics = sorted(config["name"] for config in events.resources("google_pubsub_topic").values())
    assert topics == ["acme-orders-dead-letter"]


def test_the_push_subscription_dead_letters_into_the_stacks_topic(events):
    topic, _ = _one(events, "google_pubsub_topic", name="acme-orders-dead-letter")
    _, push = _one(events, "google_pubsub_subscription", name="acme-orders-push")
    assert push["dead_letter_policy"] == {
        "dead_letter_topic": f"${{google_pubsub_topic.{topic}.id}}",
        "max_delivery_attempts": 7,
    }


def test_dead_letters_are_kept_seven_days_in_a_pull_subscription_that_never_expires(events):
    topic, _ = _one(events, "google_pubsub_topic", name="acme-orders-dead-letter")
    _, pull = _one(events, "google_pubsub_subscription", name="acme-orders-dead-letter")
    assert pull["topic"] == f"${{google_pubsub_topic.{topic}.id}}"
    assert pull["message_retention_duration"] == "604800s"
    assert pull["expiration_policy"] == {"ttl": ""}
    assert "push_config" not in pull


def test_the_pubsub_agent_is_provisioned_through_google_beta_once_pubsub_is_on(events):
    (agent,) = events.resources("google_project_service_identity").values()
    assert (agent["provider"], agent["project"], agent["service"]) == (
        "google-beta",
        "acme-prod-1",
        "pubsub.googleapis.com",
    )
    assert any(address.startswith("google_project_service.apis_pubsub") for address in agent["depends_on"])
    assert events.document["terraform"]["required_providers"]["google-beta"]["version"] == "6.50.0"


def test_the_pubsub_agent_gets_the_role_an_agent_created_on_request_lacks(events):
    roles = [
        (config["role"], config.get("condition"))
        for config in events.resources("google_project_iam_member").values()
        if config["member"] == PUBSUB_AGENT
    ]
    assert roles == [("roles/pubsub.serviceAgent", None)]


def test_every_grant_to_the_pubsub_agent_names_the_provisioned_agent(events):
    members = [
        config["member"]
        for kind in events.document["resource"]
        if kind.endswith("_iam_member")
        for config in events.resources(kind).values()
        if "pubsub" in config["member"]
    ]
    # Publisher on the dead-letter topic, subscriber on the push subscription, token creator on
    # the invoker, its own role: all through the identity, none by an interpolated email.
    assert members == [PUBSUB_AGENT] * 4


def test_the_push_subscription_waits_for_the_pubsub_agents_role(events):
    role, _ = _one(events, "google_project_iam_member", role="roles/pubsub.serviceAgent")
    settled = events.document["resource"]["time_sleep"]["invoker-settled"]
    assert f"google_project_iam_member.{role}" in settled["depends_on"]
    _, push = _one(events, "google_pubsub_subscription", name="acme-orders-push")
    assert "time_sleep.invoker-settled" in push["depends_on"]


def test_the_service_agent_publishes_dead_letters_and_consumes_the_push_subscription(events):
    agent = PUBSUB_AGENT
    topic, _ = _one(events, "google_pubsub_topic", name="acme-orders-dead-letter")
    push, _ = _one(events, "google_pubsub_subscription", name="acme-orders-push")
    topic_grants = [
        c for c in events.resources("google_pubsub_topic_iam_member").values() if c["member"] == agent
    ]
    assert [(c["topic"], c["role"]) for c in topic_grants] == [
        (f"${{google_pubsub_topic.{topic}.name}}", "roles/pubsub.publisher")
    ]
    subscription_grants = list(events.resources("google_pubsub_subscription_iam_member").values())
    assert [(c["subscription"], c["role"], c["member"]) for c in subscription_grants] == [
        (f"${{google_pubsub_subscription.{push}.name}}", "roles/pubsub.subscriber", agent)
    ]


def test_the_runtime_account_publishes_to_its_dead_letter_topic_only(events):
    topic, _ = _one(events, "google_pubsub_topic", name="acme-orders-dead-letter")
    runtime = "serviceAccount:${google_service_account.orders-identity-runtime-account.email}"
    grants = [
        (kind, config.get("topic"), config["role"])
        for kind in events.document["resource"]
        if kind.startswith("google_pubsub") and kind.endswith("_iam_member")
        for config in events.resources(kind).values()
        if config["member"] == runtime
    ]
    assert grants == [
        ("google_pubsub_topic_iam_member", f"${{google_pubsub_topic.{topic}.name}}", "roles/pubsub.publisher")
    ]


def test_the_function_gets_the_event_settings_from_the_config(events):
    _, function = _one(events, "google_cloudfunctions2_function", name="acme-orders")
    env = function["service_config"]["environment_variables"]
    assert env["RUNONCE_MAX_EVENT_AGE_SECONDS"] == str(EventJob.max_event_age_seconds)
    assert env["RUNONCE_DEAD_LETTER_TOPIC"] == "projects/acme-prod-1/topics/acme-orders-dead-letter"
    assert env["RUNONCE_JOB"] == "orders"  # the job's team-file name, which `runonce --job` takes
    assert env["RUNONCE_LEASE_SECONDS"] == "120"
    assert env["RUNONCE_RETENTION_SECONDS"] == str(8 * 24 * 3600)
    assert function["service_config"]["timeout_seconds"] == 60
    assert function["build_config"]["entry_point"] == "handle"


def test_pubsub_resources_wait_for_the_pubsub_api_and_the_settling_after_it(events):
    (api,) = [
        n
        for n, c in events.resources("google_project_service").items()
        if c["service"] == defaults.API_PUBSUB
    ]
    (settled,) = [
        f"time_sleep.{name}"
        for name, config in events.resources("time_sleep").items()
        if f"google_project_service.{api}" in config.get("depends_on", [])
    ]
    for kind in ("google_pubsub_topic", "google_pubsub_subscription", "google_pubsub_topic_iam_member"):
        for config in events.resources(kind).values():
            assert f"google_project_service.{api}" in config["depends_on"]
            assert settled in config["depends_on"]


def test_the_push_subscription_waits_for_the_invoker_grant_and_the_dead_letter_grants(events):
    _, push = _one(events, "google_pubsub_subscription", name="acme-orders-push")
    invoker, _ = _one(events, "google_cloud_run_v2_service_iam_member", role="roles/run.invoker")
    assert f"google_cloud_run_v2_service_iam_member.{invoker}" in push["depends_on"]
    assert "time_sleep.invoker-settled" in push["depends_on"]
    publishers = [
        f"google_pubsub_topic_iam_member.{n}" for n in events.resources("google_pubsub_topic_iam_member")
    ]
    assert set(publishers) <= set(push["depends_on"])


PUBSUB_AGENT = "${google_project_service_identity.pubsub-agent.member}"


def test_the_service_agent_may_create_tokens_for_the_invoker_account_only(events):
    invoker, _ = _one(events, "google_service_account", account_id="acme-call")
    assert CdktfTesting.to_have_resource_with_properties(
        events.json,
        "google_service_account_iam_member",
        {
            "service_account_id": f"${{google_service_account.{invoker}.name}}",
            "role": "roles/iam.serviceAccountTokenCreator",
            "member": PUBSUB_AGENT,
        },
    )
    # One grant, on that account: none on the project, none on any other account; at project
    # level the agent holds its own role only.
    assert len(events.resources("google_service_account_iam_member")) == 1
    assert [
        c["role"]
        for c in events.resources("google_project_iam_member").values()
        if c["role"] == "roles/iam.serviceAccountTokenCreator" or c["member"] == PUBSUB_AGENT
    ] == ["roles/pubsub.serviceAgent"]


def test_the_token_creator_grant_waits_for_the_iam_api_and_settles_before_the_push_subscription(events):
    (name,) = events.resources("google_service_account_iam_member")
    grant = events.resources("google_service_account_iam_member")[name]
    (iam_api,) = [
        n for n, c in events.resources("google_project_service").items() if c["service"] == defaults.API_IAM
    ]
    assert f"google_project_service.{iam_api}" in grant["depends_on"]
    _, push = _one(events, "google_pubsub_subscription", name="acme-orders-push")
    assert f"google_service_account_iam_member.{name}" in push["depends_on"]
    settled = events.resources("time_sleep")["invoker-settled"]
    assert f"google_service_account_iam_member.{name}" in settled["depends_on"]
    assert "time_sleep.invoker-settled" in push["depends_on"]


def test_one_token_creator_grant_serves_every_push_job_of_the_team(archive_dir):
    two = replace(GOOD_TEAM, event_jobs=[GOOD_EVENT_JOB, replace(GOOD_EVENT_JOB, name="refunds")])
    synth = synthesize(two, archive_dir)
    (name,) = synth.resources("google_service_account_iam_member")
    pushes = [c for c in synth.resources("google_pubsub_subscription").values() if "push_config" in c]
    assert len(pushes) == 2
    assert all(f"google_service_account_iam_member.{name}" in c["depends_on"] for c in pushes)


def test_a_team_without_push_jobs_grants_the_agent_no_token_creator(payments):
    assert payments.resources("google_service_account_iam_member") == {}


def test_each_event_job_counts_a_function_and_its_runtime_account_against_the_quotas():
    two = replace(GOOD_TEAM, event_jobs=[GOOD_EVENT_JOB, replace(GOOD_EVENT_JOB, name="refunds")])
    # The team's build and invoker accounts, and a runtime account per event function.
    assert usage(two) == {"service_accounts": 2 + 2, "cloud_run_services": 2, "scheduler_jobs": 0}


# ---- the Eventarc trigger ----

EVENTARC_BUCKET = replace(GOOD_EVENT_JOB, name="uploads", trigger="eventarc", bucket="acme-uploads")
EVENTARC_TOPIC = replace(GOOD_EVENT_JOB, name="orders", trigger="eventarc", topic="orders-paid")


@pytest.mark.parametrize(
    ("changes", "field"),
    [
        ({"trigger": "pull"}, "trigger"),
        ({"bucket": "acme-uploads"}, "bucket"),
        ({"trigger": "eventarc", "bucket": "acme-uploads", "topic": "orders-paid"}, "topic"),
        ({"trigger": "eventarc", "bucket": "Acme Uploads"}, "bucket"),
        ({"trigger": "eventarc", "timeout_seconds": 541}, "timeout_seconds"),
    ],
)
def test_an_eventarc_trigger_is_checked(changes, field):
    assert problems_of(**changes) == [("orders", field)]


def test_eventarc_jobs_on_a_bucket_or_a_topic_are_valid():
    assert find_problems([replace(GOOD_TEAM, event_jobs=[EVENTARC_BUCKET, EVENTARC_TOPIC])]) == []


@pytest.fixture(scope="module")
def eventarc(archive_dir):
    """A team with an Eventarc job on a bucket and one on an existing topic."""
    return synthesize(replace(GOOD_TEAM, event_jobs=[EVENTARC_BUCKET, EVENTARC_TOPIC]), archive_dir)


def test_a_bucket_trigger_is_object_finalize_retried_and_signed_by_its_own_account(eventarc):
    _, function = _one(eventarc, "google_cloudfunctions2_function", name="acme-uploads")
    account, _ = _one(eventarc, "google_service_account", account_id="acme-uploads-trg")
    assert function["event_trigger"] == {
        "trigger_region": "europe-west1",
        "event_type": "google.cloud.storage.object.v1.finalized",
        "event_filters": [{"attribute": "bucket", "value": "acme-uploads"}],
        "retry_policy": "RETRY_POLICY_RETRY",
        "service_account_email": f"${{google_service_account.{account}.email}}",
    }


def test_a_topic_trigger_listens_to_the_topic_and_is_retried(eventarc):
    _, function = _one(eventarc, "google_cloudfunctions2_function", name="acme-orders")
    trigger = function["event_trigger"]
    assert trigger["event_type"] == "google.cloud.pubsub.topic.v1.messagePublished"
    assert trigger["pubsub_topic"] == "projects/acme-prod-1/topics/orders-paid"
    assert trigger["retry_policy"] == "RETRY_POLICY_RETRY"


def test_eventarc_jobs_get_no_push_subscription_but_keep_their_dead_letters(eventarc):
    names = sorted(config["name"] for config in eventarc.resources("google_pubsub_subscription").values())
    assert names == ["acme-orders-dead-letter", "acme-uploads-dead-letter"]
    assert eventarc.resources("google_pubsub_subscription_iam_member") == {}


def test_the_trigger_account_receives_events_and_may_invoke_before_its_function_exists(eventarc):
    account, _ = _one(eventarc, "google_service_account", account_id="acme-uploads-trg")
    trigger = f"serviceAccount:${{google_service_account.{account}.email}}"
    grants = sorted(
        (kind, config["role"], config.get("name", config.get("project")))
        for kind in eventarc.document["resource"]
        if kind.endswith("_iam_member")
        for config in eventarc.resources(kind).values()
        if config["member"] == trigger
    )
    assert grants == [
        ("google_project_iam_member", "roles/eventarc.eventReceiver", "acme-prod-1"),
        ("google_project_iam_member", "roles/run.invoker", "acme-prod-1"),
    ]


def test_only_a_bucket_trigger_lets_the_storage_agent_publish(eventarc):
    agent = "${data.google_storage_project_service_account.storage-agent.member}"
    publishers = [
        config
        for config in eventarc.resources("google_project_iam_member").values()
        if config["role"] == "roles/pubsub.publisher"
    ]
    assert [config["member"] for config in publishers] == [agent]


def test_eventarc_stacks_enable_eventarc_and_pass_the_pack(eventarc):
    from policy.runner import check_stack

    services = {config["service"] for config in eventarc.resources("google_project_service").values()}
    assert {"eventarc.googleapis.com", "pubsub.googleapis.com"} <= services
    assert [str(finding) for finding in check_stack("acme", eventarc.document)] == []


def test_an_eventarc_job_counts_its_trigger_account_against_the_quotas():
    # The build account (no invoker: nothing signs as it), the runtime and the trigger account.
    assert usage(replace(GOOD_TEAM, event_jobs=[EVENTARC_BUCKET]))["service_accounts"] == 1 + 1 + 1


@pytest.mark.parametrize("account_id", ["acme-uploads-trg", "acme-orders-trg"])
def test_the_pubsub_agent_may_create_tokens_for_each_trigger_account_and_no_other(eventarc, account_id):
    account, _ = _one(eventarc, "google_service_account", account_id=account_id)
    assert CdktfTesting.to_have_resource_with_properties(
        eventarc.json,
        "google_service_account_iam_member",
        {
            "service_account_id": f"${{google_service_account.{account}.name}}",
            "role": "roles/iam.serviceAccountTokenCreator",
            "member": PUBSUB_AGENT,
        },
    )
    grants = eventarc.resources("google_service_account_iam_member").values()
    assert sorted(config["service_account_id"] for config in grants) == sorted(
        f"${{google_service_account.{name}.name}}"
        for name, config in eventarc.resources("google_service_account").items()
        if config["account_id"].endswith("-trg")
    )
    assert all(config["member"] == PUBSUB_AGENT for config in grants)


def test_the_pubsub_agent_gets_no_token_creator_on_the_project(eventarc):
    roles = {config["role"] for config in eventarc.resources("google_project_iam_member").values()}
    assert "roles/iam.serviceAccountTokenCreator" not in roles


@pytest.mark.parametrize("name", ["acme-uploads", "acme-orders"])
def test_a_triggered_function_is_created_after_its_token_creator_grant_has_settled(eventarc, name):
    _, function = _one(eventarc, "google_cloudfunctions2_function", name=name)
    trigger_account = function["event_trigger"]["service_account_email"].removesuffix(".email}")
    (grant,) = [
        f"google_service_account_iam_member.{grant}"
        for grant, config in eventarc.resources("google_service_account_iam_member").items()
        if config["service_account_id"] == f"{trigger_account}.name}}"
    ]
    assert "time_sleep.iam-settled" in function["depends_on"]
    assert grant in eventarc.resources("time_sleep")["iam-settled"]["depends_on"]


def test_a_team_with_only_eventarc_jobs_has_no_invoker_account(eventarc):
    ids = sorted(config["account_id"] for config in eventarc.resources("google_service_account").values())
    assert ids == ["acme-build", "acme-orders-run", "acme-orders-trg", "acme-uploads-run", "acme-uploads-trg"]


def test_without_its_bucket_trigger_the_storage_agents_project_grant_and_the_trigger_account_are_flagged(
    eventarc,
):
    import json

    from policy.runner import check_stack

    stack = json.loads(eventarc.json)
    function, _ = _one(eventarc, "google_cloudfunctions2_function", name="acme-uploads")
    account, _ = _one(eventarc, "google_service_account", account_id="acme-uploads-trg")
    del stack["resource"]["google_cloudfunctions2_function"][function]["event_trigger"]
    (agent_grant,) = [
        name
        for name, config in stack["resource"]["google_project_iam_member"].items()
        if "google_storage_project_service_account" in config["member"]
    ]
    (token_grant,) = [
        name
        for name, config in stack["resource"]["google_service_account_iam_member"].items()
        if config["service_account_id"] == f"${{google_service_account.{account}.name}}"
    ]
    (invoker_grant,) = [
        name
        for name, config in stack["resource"]["google_project_iam_member"].items()
        if config["role"] == "roles/run.invoker" and account in config["member"]
    ]
    (receiver_grant,) = [
        name
        for name, config in stack["resource"]["google_project_iam_member"].items()
        if config["role"] == "roles/eventarc.eventReceiver" and account in config["member"]
    ]
    found = {(finding.rule.id, finding.resource.address) for finding in check_stack("acme", stack)}
    assert found == {
        ("RO-IAM-3", f"google_project_iam_member.{agent_grant}"),
        ("RO-IAM-3", f"google_project_iam_member.{receiver_grant}"),
        # Its project-level grants are a trigger account's only while a trigger delivers as it.
        ("RO-IAM-3", f"google_project_iam_member.{invoker_grant}"),
        ("RO-IAM-7", f"google_project_iam_member.{invoker_grant}"),
        ("RO-IAM-4", f"google_service_account.{account}"),
        ("RO-IAM-9", f"google_service_account_iam_member.{token_grant}"),
    }


@pytest.mark.parametrize("delete", [True, False], ids=["no-grant", "grant-not-waited-for"])
def test_a_triggered_function_without_the_agents_token_creator_grant_before_it_is_flagged(eventarc, delete):
    import json

    from policy.runner import check_stack

    stack = json.loads(eventarc.json)
    function, _ = _one(eventarc, "google_cloudfunctions2_function", name="acme-uploads")
    account, _ = _one(eventarc, "google_service_account", account_id="acme-uploads-trg")
    grants = stack["resource"]["google_service_account_iam_member"]
    (token_grant,) = [
        name
        for name, config in grants.items()
        if config["service_account_id"] == f"${{google_service_account.{account}.name}}"
    ]
    stack["resource"]["time_sleep"]["iam-settled"]["depends_on"].remove(
        f"google_service_account_iam_member.{token_grant}"
    )
    if delete:
        del grants[token_grant]
    found = {(finding.rule.id, finding.resource.address) for finding in check_stack("acme", stack)}
    assert found == {("RO-IAM-9", f"google_cloudfunctions2_function.{function}")}
