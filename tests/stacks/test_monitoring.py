"""The team's monitoring on the synthesized JSON (docs/monitoring.md): the log-based metrics and
their filters, every alert policy with its severity, documentation and channels, the first-apply
ordering (each policy on a log-based metric after the metric and a 10-minute wait), the e-mail
channels, and the dashboard and the policies read as the Monitoring APIs' own message types."""

from __future__ import annotations

import copy
import json
import re
import shlex
from dataclasses import replace
from typing import Any

import pytest
from cdktf import TerraformStack
from cdktf import Testing as CdktfTesting
from google.cloud.monitoring_dashboard_v1.types import Dashboard
from google.cloud.monitoring_v3.types import AlertPolicy
from google.protobuf import json_format

from stacks.constructs.monitoring import Monitoring, MonitoringProps, WatchedEvents
from stacks.constructs.required_apis import RequiredApis, RequiredApisProps
from stacks.team import AlertThresholds, EventJob, Team
from tests.stacks.conftest import Synthesized, synthesize

SERVICE = re.compile(r"\$\{local\.([^}]+)\}")
"""A filter's reference to the local holding one service's `service_name` label."""
FULL_NAME = re.compile(
    r'^\$\{element\(reverse\(split\("/", '
    r"google_cloudfunctions2_function\.([^.]+)\.service_config\[0\]\.service\)\), 0\)\}$"
)
"""The local's value: the last segment of the function's service (its full name at apply time)."""
TERRAFORM_ONLY = ("//", "project", "depends_on", "lifecycle")
"""Arguments of a Terraform resource that are not fields of the API's message."""


def resources(synth: Synthesized, kind: str) -> dict[str, dict[str, Any]]:
    return synth.resources(kind)


def by_name(synth: Synthesized, kind: str, key: str) -> dict[str, dict[str, Any]]:
    """The resources of one type by one of their arguments (a metric's name, a policy's title)."""
    return {config[key]: config for config in resources(synth, kind).values()}


def policies(synth: Synthesized) -> dict[str, dict[str, Any]]:
    prefix = f"runonce {synth.team.name}: "
    return {
        name.removeprefix(prefix): config
        for name, config in by_name(synth, "google_monitoring_alert_policy", "display_name").items()
    }


def scoped(synth: Synthesized, text: str) -> set[str]:
    """The logical ids of the functions whose services a filter names."""
    locals_ = synth.document["locals"]
    return {FULL_NAME.fullmatch(locals_[name]).group(1) for name in SERVICE.findall(text)}  # type: ignore[union-attr]


def function_names(synth: Synthesized, jobs: list[str]) -> set[str]:
    """The logical ids of the functions of these jobs."""
    return {
        name
        for name, config in resources(synth, "google_cloudfunctions2_function").items()
        if config["name"] in {f"{synth.team.name}-{job}" for job in jobs}
    }


def test_the_answers_metric_counts_the_answers_of_every_function_of_the_team(example):
    metric = by_name(example, "google_logging_metric", "name")["runonce-example-answers"]
    assert scoped(example, metric["filter"]) == set(resources(example, "google_cloudfunctions2_function"))
    # The functions' and services' answers on Cloud Run, or the App Engine job's service's.
    assert metric["filter"].startswith(
        '((resource.type="cloud_run_revision" AND (resource.labels.service_name='
    )
    assert ' OR (resource.type="gae_app" AND (resource.labels.module_id="default"))) AND ' in metric["filter"]
    assert 'jsonPayload.logger="runonce"' in metric["filter"]
    assert "jsonPayload.latency_ms:*" in metric["filter"]
    assert metric["label_extractors"] == {
        "job": "EXTRACT(jsonPayload.job)",
        "outcome": "EXTRACT(jsonPayload.outcome)",
        "cause": "EXTRACT(jsonPayload.cause)",
    }
    descriptor = metric["metric_descriptor"]
    assert (descriptor["metric_kind"], descriptor["value_type"]) == ("DELTA", "INT64")
    # Labels can be added to a log-based metric, never changed: `cause` comes last.
    assert [(label["key"], label["value_type"]) for label in descriptor["labels"]] == [
        ("job", "STRING"),
        ("outcome", "STRING"),
        ("cause", "STRING"),
    ]


def test_the_dead_letter_metric_counts_the_copies_of_the_event_functions_only(example):
    metric = by_name(example, "google_logging_metric", "name")["runonce-example-dead-letters"]
    assert scoped(example, metric["filter"]) == function_names(example, ["orders"])
    assert metric["filter"].endswith("AND jsonPayload.dead_letter_message_id:*")
    assert set(metric["label_extractors"]) == {"job", "outcome"}


def test_the_missed_run_metric_counts_the_watchdogs_lines_about_the_teams_scheduler_jobs(example):
    metric = by_name(example, "google_logging_metric", "name")["runonce-example-missed-runs"]
    assert metric["filter"] == (
        'jsonPayload.logger="runonce.watchdog" AND jsonPayload.missed_run:* AND '
        '(jsonPayload.scheduler_job="example-report" OR jsonPayload.scheduler_job="example-sync" '
        'OR jsonPayload.scheduler_job="example-catalog-sync" '
        'OR jsonPayload.scheduler_job="example-ledger-close" '
        'OR jsonPayload.scheduler_job="example-books-close" '
        'OR jsonPayload.scheduler_job="example-billing-close" '
        'OR jsonPayload.scheduler_job="example-sweep")'
    )
    assert metric["label_extractors"] == {
        "job": "EXTRACT(jsonPayload.job)",
        "missed_run": "EXTRACT(jsonPayload.missed_run)",
    }


def test_no_metric_or_log_match_is_labelled_per_run(example):
    extractors = [
        config["label_extractors"] for config in resources(example, "google_logging_metric").values()
    ]
    extractors += [
        condition["condition_matched_log"].get("label_extractors", {})
        for config in resources(example, "google_monitoring_alert_policy").values()
        for condition in config["conditions"]
        if "condition_matched_log" in condition
    ]
    labels = {key for found in extractors for key in found}
    # `cause` takes three values (catch_up, backfill, rerun), not one per run.
    assert labels == {"job", "outcome", "missed_run", "cause"}


def test_a_team_without_event_jobs_has_no_dead_letter_metric_or_alert(payments):
    assert set(by_name(payments, "google_logging_metric", "name")) == {
        "runonce-payments-answers",
        "runonce-payments-missed-runs",
    }
    assert set(policies(payments)) == {
        "a run failed permanently",
        "a scheduled run was missed",
        "misconfigured or store unavailable for 5 min",
    }


def test_the_example_team_has_every_alert_with_its_severity(example):
    assert {title: config["severity"] for title, config in policies(example).items()} == {
        "a run failed permanently": "ERROR",
        "an event was dead-lettered": "ERROR",
        "a scheduled run was missed": "ERROR",
        "misconfigured or store unavailable for 5 min": "CRITICAL",
        "dead letters waiting for orders": "WARNING",
        "events of orders unacknowledged for 12 h": "CRITICAL",
    }


def test_every_alert_names_the_runonce_command_to_run_for_its_team(example):
    for title, config in policies(example).items():
        documentation = config["documentation"]
        assert documentation["mime_type"] == "text/markdown", title
        assert re.search(r"`runonce [a-z-]+ [^`]*`", documentation["content"]), title
        assert "--team example" in documentation["content"] or "runonce show KEY" in documentation["content"]


def test_the_failed_alert_matches_runs_that_will_not_run_again_on_the_teams_functions(example):
    (condition,) = policies(example)["a run failed permanently"]["conditions"]
    matched = condition["condition_matched_log"]["filter"]
    assert scoped(example, matched) == set(resources(example, "google_cloudfunctions2_function"))
    assert matched.endswith(
        'AND jsonPayload.latency_ms:* AND (jsonPayload.outcome="failed" OR jsonPayload.outcome="too_old")'
    )
    assert condition["condition_matched_log"]["label_extractors"] == {
        "job": "EXTRACT(jsonPayload.job)",
        "outcome": "EXTRACT(jsonPayload.outcome)",
    }


def test_the_dead_lettered_alert_matches_copies_and_failed_forwarding(example):
    (condition,) = policies(example)["an event was dead-lettered"]["conditions"]
    assert condition["condition_matched_log"]["filter"].endswith(
        'AND (jsonPayload.dead_letter_message_id:* OR (jsonPayload.outcome="dead_letter_failed"))'
    )


def test_every_log_match_alert_is_rate_limited_to_the_notification_period(example):
    matched = {
        title: config
        for title, config in policies(example).items()
        if any("condition_matched_log" in condition for condition in config["conditions"])
    }
    assert set(matched) == {
        "a run failed permanently",
        "an event was dead-lettered",
        "a scheduled run was missed",
    }
    for config in matched.values():
        assert config["alert_strategy"] == {"notification_rate_limit": {"period": "300s"}}
        assert len(config["conditions"]) == 1


def test_the_sustained_alert_counts_each_outcome_over_the_sustained_window(example):
    config = policies(example)["misconfigured or store unavailable for 5 min"]
    assert config["combiner"] == "OR"
    for condition, outcome in zip(config["conditions"], ("misconfigured", "store_unavailable"), strict=True):
        threshold = condition["condition_threshold"]
        # No resource type: the answers come from Cloud Run and from App Engine (the sweep job).
        assert threshold["filter"] == (
            'metric.type="logging.googleapis.com/user/runonce-example-answers" AND '
            f'metric.labels.outcome="{outcome}"'
        )
        assert (threshold["comparison"], threshold["threshold_value"], threshold["duration"]) == (
            "COMPARISON_GT",
            1,
            "300s",
        )
        assert threshold["aggregations"] == [{"alignment_period": "300s", "per_series_aligner": "ALIGN_SUM"}]


def test_the_push_backlog_alert_fires_at_half_the_retry_window(example):
    (condition,) = policies(example)["events of orders unacknowledged for 12 h"]["conditions"]
    threshold = condition["condition_threshold"]
    assert threshold["threshold_value"] == 24 * 3600 // 2
    assert threshold["filter"] == (
        'metric.type="pubsub.googleapis.com/subscription/oldest_unacked_message_age" AND '
        'resource.type="pubsub_subscription" AND resource.labels.subscription_id="example-orders-push"'
    )


def test_the_dead_letter_backlog_alert_watches_the_dead_letter_subscription(example):
    (condition,) = policies(example)["dead letters waiting for orders"]["conditions"]
    threshold = condition["condition_threshold"]
    assert 'resource.labels.subscription_id="example-orders-dead-letter"' in threshold["filter"]
    assert "subscription/num_undelivered_messages" in threshold["filter"]
    assert (threshold["comparison"], threshold["threshold_value"]) == ("COMPARISON_GT", 0)
    subscription_ids = {
        config["name"] for config in resources(example, "google_pubsub_subscription").values()
    }
    assert {"example-orders-push", "example-orders-dead-letter"} <= subscription_ids


def test_an_alert_on_a_log_based_metric_waits_for_the_metric_on_the_first_apply(example):
    sleeps = resources(example, "time_sleep")
    (settled,) = [name for name in sleeps if name.startswith("monitoring_metrics-settled")]
    metrics = {f"google_logging_metric.{name}" for name in resources(example, "google_logging_metric")}
    assert sleeps[settled]["create_duration"] == "600s"
    assert set(sleeps[settled]["depends_on"]) == metrics
    policy = policies(example)["misconfigured or store unavailable for 5 min"]
    answers = [name for name in metrics if "answers" in name]
    assert set(answers) | {f"time_sleep.{settled}"} <= set(policy["depends_on"])


def test_the_metrics_and_monitoring_resources_wait_for_their_apis(example):
    enabled = {
        config["service"]: name for name, config in resources(example, "google_project_service").items()
    }
    logging_api = f"google_project_service.{enabled['logging.googleapis.com']}"
    monitoring_api = f"google_project_service.{enabled['monitoring.googleapis.com']}"
    for config in resources(example, "google_logging_metric").values():
        assert logging_api in config["depends_on"]
    for kind in (
        "google_monitoring_alert_policy",
        "google_monitoring_notification_channel",
        "google_monitoring_dashboard",
    ):
        for config in resources(example, kind).values():
            assert monitoring_api in config["depends_on"], kind


def test_every_alert_notifies_the_teams_email_channel(example):
    ((name, channel),) = resources(example, "google_monitoring_notification_channel").items()
    assert (channel["type"], channel["labels"]) == ("email", {"email_address": "platform-oncall@example.com"})
    for config in policies(example).values():
        assert config["notification_channels"] == [f"${{google_monitoring_notification_channel.{name}.name}}"]


def test_existing_channels_are_notified_beside_the_created_ones(payments):
    (name,) = resources(payments, "google_monitoring_notification_channel")
    ((existing, _),) = payments.document["data"]["google_monitoring_notification_channel"].items()
    for config in policies(payments).values():
        assert config["notification_channels"] == [
            f"${{data.google_monitoring_notification_channel.{existing}.name}}",
            f"${{google_monitoring_notification_channel.{name}.name}}",
        ]


def test_an_existing_channel_is_read_at_plan_by_its_display_name_in_the_teams_project(payments):
    ((_, channel),) = payments.document["data"]["google_monitoring_notification_channel"].items()
    # No depends_on: a data source depending on a resource with pending changes is read during
    # the apply, and a missing channel would then fail half way through a first apply.
    assert channel == {"display_name": "Payments on-call", "project": "runonce-payments"}


def dashboard_json(synth: Synthesized) -> str:
    (config,) = resources(synth, "google_monitoring_dashboard").values()
    return config["dashboard_json"]


def parse_dashboard(text: str) -> Any:
    """The dashboard JSON read as the Dashboards API's message; unknown fields are refused."""
    return json_format.Parse(text, Dashboard.pb(Dashboard()), ignore_unknown_fields=False)


def test_the_dashboard_parses_as_the_dashboards_api_type(example):
    dashboard = parse_dashboard(dashboard_json(example))
    assert dashboard.display_name == "runonce example"
    assert [tile.widget.title for tile in dashboard.mosaic_layout.tiles] == [
        "Runs per job by outcome",
        "Duplicates skipped (duplicate)",
        "Held by another attempt (409 in_progress)",
        "Answers that ask for a retry (5xx)",
        "Permanent failures (failed)",
        "Skipped by the overlap policy (skipped)",
        "Waiting for the run before (409 waiting)",
        "Excluded by the job's calendar (excluded)",
        "Runs caught up or backfilled (cause)",
        "Missed runs (watchdog)",
        "Dead-letter backlog",
        "Request latency (99th percentile, ms)",
    ]
    for tile in dashboard.mosaic_layout.tiles:
        assert tile.x_pos + tile.width <= dashboard.mosaic_layout.columns


def test_a_misspelt_dashboard_field_fails_the_check(example):
    document = json.loads(dashboard_json(example))
    document["mosaicLayout"]["tiles"][0]["widget"]["xyChart"]["dataSet"] = []
    with pytest.raises(json_format.ParseError, match="dataSet"):
        parse_dashboard(json.dumps(document))


def test_the_dashboards_latency_chart_shows_every_function(example):
    document = json.loads(dashboard_json(example))
    (latency,) = [
        tile
        for tile in document["mosaicLayout"]["tiles"]
        if tile["widget"]["title"].startswith("Request latency")
    ]
    filters = [
        data["timeSeriesQuery"]["timeSeriesFilter"]["filter"]
        for data in latency["widget"]["xyChart"]["dataSets"]
    ]
    assert {found for text in filters for found in scoped(example, text)} == set(
        resources(example, "google_cloudfunctions2_function")
    )
    *cloud_run, app_engine = filters
    assert all(text.startswith('metric.type="run.googleapis.com/request_latencies"') for text in cloud_run)
    assert app_engine == (
        'metric.type="appengine.googleapis.com/http/server/response_latencies" AND resource.type="gae_app" '
        'AND resource.labels.module_id="default"'
    )


def as_alert_policy(config: dict[str, Any]) -> Any:
    """A synthesized google_monitoring_alert_policy read as the Monitoring API's AlertPolicy: the
    provider's arguments carry the API's field names in snake case (which protobuf's JSON reader
    takes), its blocks are the API's messages, and only the Terraform-only arguments go."""
    fields = {key: value for key, value in copy.deepcopy(config).items() if key not in TERRAFORM_ONLY}
    return json_format.ParseDict(fields, AlertPolicy.pb(AlertPolicy()), ignore_unknown_fields=False)


def test_every_alert_policy_parses_as_the_monitoring_api_type(example):
    for title, config in policies(example).items():
        parsed = as_alert_policy(config)
        assert parsed.display_name == f"runonce example: {title}"
        assert parsed.documentation.content == config["documentation"]["content"]
        assert len(parsed.conditions) == len(config["conditions"])


def test_a_misspelt_alert_policy_field_fails_the_check(example):
    config = copy.deepcopy(policies(example)["a run failed permanently"])
    config["alert_strategy"]["notification_rate_limits"] = config["alert_strategy"].pop(
        "notification_rate_limit"
    )
    with pytest.raises(json_format.ParseError, match="notification_rate_limits"):
        as_alert_policy(config)


def test_alerts_false_keeps_the_metrics_and_the_dashboard_but_creates_no_alert(archive_dir):
    team = Team(
        name="quiet",
        project="quiet-prod-1",
        region="europe-west1",
        jobs=[],
        event_jobs=[EventJob(name="orders", source="orders_events", timeout_seconds=60)],
        alerts=False,
    )
    synth = synthesize(team, archive_dir)
    assert set(by_name(synth, "google_logging_metric", "name")) == {
        "runonce-quiet-answers",
        "runonce-quiet-dead-letters",
    }
    assert len(resources(synth, "google_monitoring_dashboard")) == 1
    assert resources(synth, "google_monitoring_alert_policy") == {}
    assert resources(synth, "google_monitoring_notification_channel") == {}
    assert not [name for name in resources(synth, "time_sleep") if name.startswith("monitoring_")]


def test_an_eventarc_job_gets_no_push_backlog_alert(archive_dir):
    team = Team(
        name="arc",
        project="arc-prod-1",
        region="europe-west1",
        jobs=[],
        event_jobs=[EventJob(name="uploads", source="orders_events", trigger="eventarc", timeout_seconds=60)],
        alert_emails=["oncall@example.com"],
    )
    titles = set(policies(synthesize(team, archive_dir)))
    assert "dead letters waiting for uploads" in titles
    assert not [title for title in titles if "unacknowledged" in title]


def test_the_thresholds_come_from_the_team_file(example, archive_dir):
    team = replace(
        example.team,
        alert_thresholds=AlertThresholds(sustained_seconds=600, notification_period_seconds=1800),
    )
    found = policies(synthesize(team, archive_dir))
    sustained = found["misconfigured or store unavailable for 10 min"]["conditions"][0]["condition_threshold"]
    assert sustained["duration"] == "600s"
    assert found["a run failed permanently"]["alert_strategy"]["notification_rate_limit"]["period"] == "1800s"


RECEIPTS = "projects/acme-alone-1/locations/europe-west1/services/orders-receipts"
"""A service's full name, as a function's `service_config[0].service` holds it."""


def test_monitoring_alone_watches_only_the_services_and_subscriptions_it_is_given():
    stack = TerraformStack(CdktfTesting.app(), "alone")
    apis = RequiredApis(stack, "apis", RequiredApisProps(project="acme-alone-1"))
    props = MonitoringProps(
        project="acme-alone-1",
        team="orders",
        services={"receipts": RECEIPTS},
        event_services=[RECEIPTS],
        scheduler_jobs={},
        events=[WatchedEvents(job="receipts", dead_letter_subscription="orders-receipts-dead-letter")],
        apis=apis,
        channels=["orders on-call"],
    )
    Monitoring(stack, "monitoring", props)
    synthesized = json.loads(CdktfTesting.synth(stack))
    document = synthesized["resource"]
    metrics = {config["name"]: config for config in document["google_logging_metric"].values()}
    assert set(metrics) == {"runonce-orders-answers", "runonce-orders-dead-letters"}
    (local,) = SERVICE.findall(metrics["runonce-orders-answers"]["filter"])
    assert synthesized["locals"][local] == f'${{element(reverse(split("/", "{RECEIPTS}")), 0)}}'
    titles = {config["display_name"] for config in document["google_monitoring_alert_policy"].values()}
    assert titles == {
        "runonce orders: a run failed permanently",
        "runonce orders: an event was dead-lettered",
        "runonce orders: misconfigured or store unavailable for 5 min",
        "runonce orders: dead letters waiting for receipts",
    }
    read = json.loads(CdktfTesting.synth(stack))["data"]["google_monitoring_notification_channel"]
    ((channel, config),) = read.items()
    assert config["display_name"] == "orders on-call"
    for config in document["google_monitoring_alert_policy"].values():
        assert config["notification_channels"] == [
            f"${{data.google_monitoring_notification_channel.{channel}.name}}"
        ]
    assert "google_monitoring_notification_channel" not in document


def test_only_the_alerts_on_log_based_metrics_wait_and_the_dashboard_follows_the_metrics(example):
    metrics = {f"google_logging_metric.{name}" for name in resources(example, "google_logging_metric")}
    waiting = {
        title
        for title, config in policies(example).items()
        if any(
            address.startswith("time_sleep.monitoring_metrics-settled") for address in config["depends_on"]
        )
    }
    assert waiting == {"misconfigured or store unavailable for 5 min"}
    (dashboard,) = resources(example, "google_monitoring_dashboard").values()
    assert metrics <= set(dashboard["depends_on"])


def test_an_email_keeps_its_channel_when_the_list_is_reordered(example, archive_dir):
    team = replace(example.team, alert_emails=["second@example.com", "platform-oncall@example.com"])
    reordered = synthesize(replace(team, alert_emails=list(reversed(team.alert_emails))), archive_dir)
    first = synthesize(team, archive_dir)
    addresses = {
        name: config["labels"]["email_address"]
        for name, config in resources(first, "google_monitoring_notification_channel").items()
    }
    assert len(addresses) == 2
    assert addresses == {
        name: config["labels"]["email_address"]
        for name, config in resources(reordered, "google_monitoring_notification_channel").items()
    }


PLACEHOLDER_VALUES = {"SCHEDULE_TIME": "2026-12-01T00:00:00Z", "TIME": "2026-12-01T00:00:00Z"}


@pytest.mark.parametrize("stack", ["example", "payments"])
def test_every_runonce_command_an_alert_names_is_one_the_tool_accepts(stack, request):
    """Each `runonce ...` between backticks in an alert's documentation, its placeholders (JOB,
    SCHEDULE_TIME, KEY, ...) filled in, is read by the CLI's own parser: an operator who pastes it
    is not refused for a verb, an option or a missing --team (the missed-run runbook once named
    `gcloud scheduler jobs run` where `runonce backfill` runs exactly the run)."""
    from operate import cli

    texts = [
        config["documentation"]["content"] for config in policies(request.getfixturevalue(stack)).values()
    ]
    assert not any("gcloud scheduler jobs run" in text for text in texts)
    commands = [command for text in texts for command in re.findall(r"`(runonce [^`]*)`", text)]
    assert any(command.startswith("runonce backfill") for command in commands)
    for command in commands:
        words = [
            re.sub(r"\b[A-Z][A-Z_]+\b", lambda found: PLACEHOLDER_VALUES.get(found.group(), "x"), word)
            for word in shlex.split(command)
        ]
        assert words[1] in cli.runonce.commands, command
        cli.runonce.commands[words[1]].make_context(words[1], words[2:])


# ---------------------------------------------------------------------------------------------
# A chart per job the watchdog may pause (docs/monitoring.md, "Dashboard"); the oracle proves the
# filters match the watchdog's and the library's real lines (tests/stacks/test_filter_oracle.py).

PAUSE_CHART = ": pauses and failed runs"


@pytest.fixture(scope="module")
def pausing(archive_dir) -> Synthesized:
    """The team whose job `nightly` is paused after 3 failed runs (tests/stacks/test_pause.py)."""
    from tests.stacks.test_pause import PAUSING

    return synthesize(replace(PAUSING, alerts=True), archive_dir)


def test_a_job_that_may_be_paused_gets_a_chart_of_its_pauses_its_failed_and_its_retried_out_runs(pausing):
    dashboard = parse_dashboard(dashboard_json(pausing))
    (tile,) = [tile for tile in dashboard.mosaic_layout.tiles if tile.widget.title.endswith(PAUSE_CHART)]
    assert tile.widget.title == f"nightly{PAUSE_CHART}"
    found = [
        (data.legend_template, data.time_series_query.time_series_filter.filter)
        for data in tile.widget.xy_chart.data_sets
    ]
    prefix = "logging.googleapis.com/user/runonce-pausing"
    # The pause line's `job` and the watchdog's missed-run line's `job` are the team file's name;
    # an answer line's `job` is the X-CloudScheduler-JobName header, the Scheduler job's short id.
    assert found == [
        ("paused", f'metric.type="{prefix}-paused-jobs" AND metric.labels.job="nightly"'),
        (
            "failed",
            f'metric.type="{prefix}-answers" AND resource.type="cloud_run_revision" AND '
            'metric.labels.job="pausing-nightly" AND metric.labels.outcome="failed"',
        ),
        (
            "retried_out",
            f'metric.type="{prefix}-missed-runs" AND metric.labels.job="nightly" AND '
            'metric.labels.missed_run="retried_out"',
        ),
    ]
    assert pausing.team.jobs[0].pause_after_failures == 3


def test_the_paused_jobs_metric_counts_the_watchdogs_pause_lines_by_job(pausing):
    metric = by_name(pausing, "google_logging_metric", "name")["runonce-pausing-paused-jobs"]
    assert metric["filter"] == (
        'jsonPayload.logger="runonce.watchdog" AND jsonPayload.paused_after_failures:* AND '
        '(jsonPayload.scheduler_job="pausing-nightly")'
    )
    assert metric["label_extractors"] == {"job": "EXTRACT(jsonPayload.job)"}
    assert CdktfTesting.to_have_resource_with_properties(
        pausing.json,
        "google_logging_metric",
        {
            "name": "runonce-pausing-paused-jobs",
            "metric_descriptor": {"metric_kind": "DELTA", "value_type": "INT64"},
        },
    )
    (dashboard,) = resources(pausing, "google_monitoring_dashboard").values()
    (address,) = [
        name
        for name, config in resources(pausing, "google_logging_metric").items()
        if config["name"] == "runonce-pausing-paused-jobs"
    ]
    assert f"google_logging_metric.{address}" in dashboard["depends_on"]


def test_a_team_whose_watchdog_pauses_no_job_has_no_pause_chart_and_no_paused_jobs_metric(example, payments):
    for synth in (example, payments):
        assert all(job.pause_after_failures == 0 for job in synth.team.scheduled_views)
        titles = [tile.widget.title for tile in parse_dashboard(dashboard_json(synth)).mosaic_layout.tiles]
        assert not [title for title in titles if title.endswith(PAUSE_CHART)]
        assert not [
            name for name in by_name(synth, "google_logging_metric", "name") if name.endswith("-paused-jobs")
        ]


def test_only_the_jobs_that_may_be_paused_get_a_chart(archive_dir):
    from tests.stacks.test_pause import PAUSING

    nightly = PAUSING.jobs[0]
    team = replace(PAUSING, jobs=[nightly, replace(nightly, name="weekly", pause_after_failures=0)])
    titles = [
        tile.widget.title
        for tile in parse_dashboard(dashboard_json(synthesize(team, archive_dir))).mosaic_layout.tiles
    ]
    assert [title for title in titles if title.endswith(PAUSE_CHART)] == [f"nightly{PAUSE_CHART}"]
