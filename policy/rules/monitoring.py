"""Monitoring rules: alerts reach only private channels, metrics never have a label per run, every
alert says which `runonce` command to run, and the first apply creates a policy only once the
log-based metric it reads is known (docs/monitoring.md)."""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from typing import Any

from policy.synthesized import Resource, Stack, block, values_at
from policy.verdict import Verdict

PRIVATE_CHANNEL_TYPES = {"email"}
"""The channel types a stack may create: an e-mail goes to one named mailbox. Every other type
sends the alert (its documentation, the job names, the log's labels) to a URL or a third-party
workspace (webhook_tokenauth carries its only secret in the URL, webhook_basicauth, slack,
pagerduty, sms...), so a team that needs one creates it outside the stack, reviewed, and names
it in `notification_channels`."""
PER_RUN_FIELDS = {
    "run_key",
    "attempt_id",
    "attempt",
    "schedule_time",
    "event_id",
    "message_id",
    "dead_letter_message_id",
    "time",
    "command",
    "logging.googleapis.com/trace",
    "logging.googleapis.com/spanId",
}
"""Log fields with a new value for every run, event or attempt (docs/library.md, "Logs"; the
watchdog's line): a metric label of one of them makes one time series per run."""
EXTRACTED_FIELD = re.compile(r"jsonPayload\.([A-Za-z0-9_./\"-]+)")
# A log-based metric in a Monitoring filter, by a reference to a metric of the stack or by name.
LOG_METRIC_TYPE = re.compile(
    r'logging\.googleapis\.com/user/(?:\$\{google_logging_metric\.([^.}]+)\.name\}|([^"\s]+))'
)
METRIC_FILTERS = (
    ("conditions", "condition_threshold", "filter"),
    ("conditions", "condition_threshold", "denominator_filter"),
    ("conditions", "condition_absent", "filter"),
)
METRIC_SETTLE_SECONDS = 600
"""Monitoring can refuse a policy on a log-based metric for up to 10 minutes after the metric was
created (provider issue 11102: "it could take up to 10 minutes to become available")."""
RUNONCE_COMMAND = re.compile(r"`runonce [a-z-]+[^`]*`")
ALERT_POLICY = "google_monitoring_alert_policy"


def private_channels(resource: Resource, _stack: Stack) -> Verdict:
    """A notification channel the stack creates is an e-mail channel with one address."""
    if resource.type != "google_monitoring_notification_channel":
        return Verdict.NOT_APPLICABLE
    private = resource.config.get("type") in PRIVATE_CHANNEL_TYPES
    labels = resource.config.get("labels")
    address = labels.get("email_address") if isinstance(labels, Mapping) else None
    return Verdict.COMPLIANT if private and address else Verdict.NON_COMPLIANT


def _extractors(resource: Resource) -> Iterator[tuple[str, str]]:
    """Every (label, extractor) of a log-based metric or of an alert's log-match conditions."""
    if resource.type == "google_logging_metric":
        found: Any = [resource.config.get("label_extractors", {})]
    else:
        found = values_at(resource.config, ("conditions", "condition_matched_log", "label_extractors"))
    for extractors in found:
        if isinstance(extractors, Mapping):
            yield from ((str(key), str(value)) for key, value in extractors.items())


def no_per_run_labels(resource: Resource, _stack: Stack) -> Verdict:
    """No label of a log-based metric (nor of an alert's log-match condition) is extracted from a
    field that changes with every run: the run key, an event or message id, an attempt, a time,
    a trace. Each value is a new time series (or, for a log match, a new rule to notify on)."""
    if resource.type not in ("google_logging_metric", ALERT_POLICY):
        return Verdict.NOT_APPLICABLE
    for label, extractor in _extractors(resource):
        fields = {found.strip('"') for found in EXTRACTED_FIELD.findall(extractor)}
        if label in PER_RUN_FIELDS or fields & PER_RUN_FIELDS:
            return Verdict.NON_COMPLIANT
    return Verdict.COMPLIANT


def alert_names_a_command(resource: Resource, _stack: Stack) -> Verdict:
    """Every alert policy carries Markdown documentation naming the `runonce` command to run."""
    if resource.type != ALERT_POLICY:
        return Verdict.NOT_APPLICABLE
    documentation = block(resource.config, "documentation")
    markdown = documentation.get("mime_type") == "text/markdown"
    command = RUNONCE_COMMAND.search(str(documentation.get("content", "")))
    return Verdict.COMPLIANT if markdown and command else Verdict.NON_COMPLIANT


def log_match_is_rate_limited(resource: Resource, _stack: Stack) -> Verdict:
    """A policy with a log-match condition sets alert_strategy.notification_rate_limit.period
    (Monitoring requires it for log-based alerts) and nothing but that one condition (a log match
    may not be combined with other conditions)."""
    if resource.type != ALERT_POLICY:
        return Verdict.NOT_APPLICABLE
    conditions = resource.config.get("conditions", [])
    conditions = conditions if isinstance(conditions, list) else [conditions]
    matched = [condition for condition in conditions if block(condition, "condition_matched_log")]
    if not matched:
        return Verdict.NOT_APPLICABLE
    period = block(block(resource.config, "alert_strategy"), "notification_rate_limit").get("period")
    return Verdict.COMPLIANT if period and len(conditions) == 1 else Verdict.NON_COMPLIANT


def no_absence_conditions(resource: Resource, _stack: Stack) -> Verdict:
    """No metric-absence condition: one lasts at most 23.5 hours and needs a data point after it is
    created, so it cannot watch a daily job, and a new job's first run raises it; missed runs are
    the watchdog's (its log lines feed the missed-run alert)."""
    if resource.type != ALERT_POLICY:
        return Verdict.NOT_APPLICABLE
    absent = list(values_at(resource.config, ("conditions", "condition_absent")))
    return Verdict.NON_COMPLIANT if any(absent) else Verdict.COMPLIANT


def policy_waits_for_its_metrics(resource: Resource, stack: Stack) -> Verdict:
    """A policy reading a log-based metric depends on that `google_logging_metric` of the stack and
    on a `time_sleep` of at least 10 minutes after it: until Monitoring knows a new metric, the
    policy is refused ("Cannot find metric(s)", provider issue 11102)."""
    if resource.type != ALERT_POLICY:
        return Verdict.NOT_APPLICABLE
    found = [
        match.groups()
        for path in METRIC_FILTERS
        for text in values_at(resource.config, path)
        for match in LOG_METRIC_TYPE.finditer(str(text))
    ]
    if not found:
        return Verdict.NOT_APPLICABLE
    by_name = {config.get("name"): name for name, config in stack.configs("google_logging_metric").items()}
    referenced = {f"google_logging_metric.{name}" for name, _ in found if name}
    named = {metric for _, metric in found if metric}
    if not named <= set(by_name):
        return Verdict.NON_COMPLIANT  # a metric of another stack, or of none: its order is unknown
    depended = {f"google_logging_metric.{by_name[metric]}" for metric in named}
    waited = depended <= set(resource.depends_on) and all(
        stack.sleeps_after(resource, {address}, METRIC_SETTLE_SECONDS) for address in depended | referenced
    )
    return Verdict.COMPLIANT if waited else Verdict.NON_COMPLIANT
