"""The monitoring rules (policy/rules/monitoring.py) on small hand-written resources: what each one
accepts, what it flags, and what it leaves alone (tests/policy/test_rules.py runs each on the
every-feature stack)."""

from __future__ import annotations

from typing import Any

from policy.rules import monitoring
from policy.synthesized import Resource, Stack
from policy.verdict import Verdict

DOCUMENTED = {"content": "Read it: `runonce show KEY`.", "mime_type": "text/markdown"}
METRIC_FILTER = (
    'metric.type="logging.googleapis.com/user/runonce-acme-answers" AND resource.type="cloud_run_revision"'
)


def policy(**config: Any) -> Resource:
    return Resource("google_monitoring_alert_policy", "policy", {"documentation": DOCUMENTED, **config})


def stack(**resources: dict[str, dict[str, Any]]) -> Stack:
    return Stack({"resource": resources})


def channel(kind: str, labels: dict[str, str]) -> Resource:
    return Resource("google_monitoring_notification_channel", "channel", {"type": kind, "labels": labels})


def test_only_email_channels_with_an_address_are_private():
    check = monitoring.private_channels
    assert check(channel("email", {"email_address": "a@example.com"}), stack()) is Verdict.COMPLIANT
    assert check(channel("email", {}), stack()) is Verdict.NON_COMPLIANT
    for kind in ("webhook_tokenauth", "webhook_basicauth", "slack", "sms", "pagerduty"):
        assert check(channel(kind, {"url": "https://x"}), stack()) is Verdict.NON_COMPLIANT, kind
    assert check(policy(), stack()) is Verdict.NOT_APPLICABLE


def metric(extractors: dict[str, str]) -> Resource:
    return Resource("google_logging_metric", "m", {"name": "m", "label_extractors": extractors})


def test_a_label_from_a_per_run_field_is_flagged_whatever_the_label_is_called():
    check = monitoring.no_per_run_labels
    assert check(metric({"job": "EXTRACT(jsonPayload.job)"}), stack()) is Verdict.COMPLIANT
    assert check(metric({"key": "EXTRACT(jsonPayload.run_key)"}), stack()) is Verdict.NON_COMPLIANT
    assert check(metric({"run_key": "EXTRACT(jsonPayload.job)"}), stack()) is Verdict.NON_COMPLIANT
    assert (
        check(metric({"id": 'REGEXP_EXTRACT(jsonPayload.event_id, "(.*)")'}), stack())
        is Verdict.NON_COMPLIANT
    )
    assert check(metric({"at": "EXTRACT(jsonPayload.schedule_time)"}), stack()) is Verdict.NON_COMPLIANT


def test_a_log_match_condition_labelled_per_run_is_flagged_too():
    condition = {
        "condition_matched_log": {"filter": "x", "label_extractors": {"k": "EXTRACT(jsonPayload.run_key)"}}
    }
    assert monitoring.no_per_run_labels(policy(conditions=[condition]), stack()) is Verdict.NON_COMPLIANT


def test_documentation_must_be_markdown_naming_a_runonce_command():
    check = monitoring.alert_names_a_command
    assert check(policy(), stack()) is Verdict.COMPLIANT
    plain = {"content": "Run `runonce show KEY`.", "mime_type": "text/plain"}
    assert check(policy(documentation=plain), stack()) is Verdict.NON_COMPLIANT
    vague = {"content": "Use runonce to look into it.", "mime_type": "text/markdown"}
    assert check(policy(documentation=vague), stack()) is Verdict.NON_COMPLIANT
    assert check(Resource("google_monitoring_alert_policy", "p", {}), stack()) is Verdict.NON_COMPLIANT


def test_a_log_match_needs_a_rate_limit_and_no_other_condition():
    check = monitoring.log_match_is_rate_limited
    matched = {"condition_matched_log": {"filter": "x"}}
    limited = {"notification_rate_limit": {"period": "300s"}}
    assert check(policy(conditions=[matched], alert_strategy=limited), stack()) is Verdict.COMPLIANT
    assert check(policy(conditions=[matched]), stack()) is Verdict.NON_COMPLIANT
    other = {"condition_threshold": {"filter": METRIC_FILTER}}
    assert (
        check(policy(conditions=[matched, other], alert_strategy=limited), stack()) is Verdict.NON_COMPLIANT
    )
    assert check(policy(conditions=[other]), stack()) is Verdict.NOT_APPLICABLE


def test_an_absence_condition_is_flagged():
    check = monitoring.no_absence_conditions
    assert check(policy(conditions=[{"condition_threshold": {}}]), stack()) is Verdict.COMPLIANT
    absent = {"condition_absent": {"duration": "3600s", "filter": METRIC_FILTER}}
    assert check(policy(conditions=[absent]), stack()) is Verdict.NON_COMPLIANT


METRIC = {"name": "runonce-acme-answers"}
SETTLED = {"create_duration": "600s", "depends_on": ["google_logging_metric.answers"]}


def waiting(*depends_on: str) -> Resource:
    return policy(
        conditions=[{"condition_threshold": {"filter": METRIC_FILTER}}], depends_on=list(depends_on)
    )


def test_a_policy_on_a_log_based_metric_waits_for_it_and_ten_minutes():
    check = monitoring.policy_waits_for_its_metrics
    both = stack(google_logging_metric={"answers": METRIC}, time_sleep={"settled": SETTLED})
    on_both = waiting("google_logging_metric.answers", "time_sleep.settled")
    assert check(on_both, both) is Verdict.COMPLIANT
    assert check(waiting("google_logging_metric.answers"), both) is Verdict.NON_COMPLIANT
    assert check(waiting("time_sleep.settled"), both) is Verdict.NON_COMPLIANT
    short = stack(
        google_logging_metric={"answers": METRIC},
        time_sleep={"settled": {**SETTLED, "create_duration": "60s"}},
    )
    assert check(on_both, short) is Verdict.NON_COMPLIANT


def test_a_policy_on_a_metric_the_stack_does_not_create_is_flagged():
    unrelated = stack(google_logging_metric={"other": {"name": "runonce-acme-other"}})
    assert monitoring.policy_waits_for_its_metrics(waiting(), unrelated) is Verdict.NON_COMPLIANT


def test_a_policy_on_a_built_in_metric_needs_no_wait():
    built_in = 'metric.type="pubsub.googleapis.com/subscription/num_undelivered_messages"'
    resource = policy(conditions=[{"condition_threshold": {"filter": built_in}}])
    assert monitoring.policy_waits_for_its_metrics(resource, stack()) is Verdict.NOT_APPLICABLE


def test_a_policy_naming_its_metric_by_reference_still_waits_ten_minutes():
    reference = 'metric.type="logging.googleapis.com/user/${google_logging_metric.answers.name}"'
    resource = policy(conditions=[{"condition_threshold": {"filter": reference}}], depends_on=[])
    both = stack(google_logging_metric={"answers": METRIC}, time_sleep={"settled": SETTLED})
    assert monitoring.policy_waits_for_its_metrics(resource, both) is Verdict.NON_COMPLIANT
    waited = policy(
        conditions=[{"condition_threshold": {"filter": reference}}], depends_on=["time_sleep.settled"]
    )
    assert monitoring.policy_waits_for_its_metrics(waited, both) is Verdict.COMPLIANT


def test_an_absence_condition_on_a_new_metric_must_wait_too():
    absent = {"condition_absent": {"duration": "3600s", "filter": METRIC_FILTER}}
    both = stack(google_logging_metric={"answers": METRIC}, time_sleep={"settled": SETTLED})
    assert monitoring.policy_waits_for_its_metrics(policy(conditions=[absent]), both) is Verdict.NON_COMPLIANT
