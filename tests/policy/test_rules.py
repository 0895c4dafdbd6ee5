"""Every rule of the pack, on synthesized JSON: it finds the every-feature stack compliant (on the
resource it is about, and nowhere non-compliant), and flags that resource once it is broken."""

from __future__ import annotations

import copy
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest

from policy.pack import LEAST_PRIVILEGE, Rule
from policy.synthesized import Stack
from policy.verdict import Verdict

Document = dict[str, Any]
PACK = {rule.id: rule for rule in LEAST_PRIVILEGE}


def named(document: Document, kind: str, prefix: str) -> str:
    """The name of the one resource of `kind` whose logical id starts with `prefix`."""
    (name,) = [name for name in document["resource"].get(kind, {}) if name.startswith(prefix)]
    return name


def config(document: Document, kind: str, prefix: str) -> dict[str, Any]:
    """The config of the one resource of `kind` whose logical id starts with `prefix`."""
    return document["resource"][kind][named(document, kind, prefix)]


def verdicts(rule: Rule, document: Document) -> dict[str, Verdict]:
    """The rule's verdict on every resource of the stack, by address."""
    stack = Stack(document)
    return {resource.address: rule.check(resource, stack) for resource in stack.resources()}


def drop_dependency(kind: str, prefix: str, pattern: str) -> Callable[[Document], None]:
    """Remove the `depends_on` entries matching `pattern` from one resource."""

    def change(document: Document) -> None:
        found = config(document, kind, prefix)
        found["depends_on"] = [d for d in found["depends_on"] if not re.search(pattern, d)]

    return change


def set_at(kind: str, prefix: str, path: str, value: Any) -> Callable[[Document], None]:
    """Set (or, for None, delete) the argument at a dotted path of one resource."""

    def change(document: Document) -> None:
        *parents, last = path.split(".")
        found = config(document, kind, prefix)
        for key in parents:
            found = found[key]
        if value is None:
            del found[last]
        else:
            found[last] = value

    return change


def share_runtime_account(document: Document) -> None:
    report = config(document, "google_cloudfunctions2_function", "report-function")
    etl = config(document, "google_cloudfunctions2_function", "etl-function")
    etl["service_config"]["service_account_email"] = report["service_config"]["service_account_email"]


def export_a_key(document: Document) -> None:
    document["resource"]["google_service_account_key"] = {
        "exported": {"service_account_id": "${google_service_account.team-build-account.name}"}
    }


def drop_gcf_source_readers(document: Document) -> None:
    grants = document["resource"]["google_project_iam_member"]
    for name in [name for name in grants if "gcf-source-reader" in name]:
        del grants[name]


def publish_to_the_source_topic(document: Document) -> None:
    source = named(document, "google_pubsub_topic", "orders-events_topic")
    grant = config(document, "google_pubsub_topic_iam_member", "orders-events_runtime-dead-letter-publisher")
    grant["topic"] = f"${{google_pubsub_topic.{source}.name}}"


def watch_for_absence(document: Document) -> None:
    policy = config(document, "google_monitoring_alert_policy", "monitoring_store-or-config")
    threshold = policy["conditions"][0]["condition_threshold"]
    policy["conditions"].append(
        {
            "display_name": "no answers",
            "condition_absent": {"filter": threshold["filter"], "duration": "3600s"},
        }
    )


def drop_grants(prefix: str) -> Callable[[Document], None]:
    """Remove every grant whose logical id starts with `prefix`."""

    def change(document: Document) -> None:
        for grants in document["resource"].values():
            for name in [name for name in grants if name.startswith(prefix)]:
                del grants[name]

    return change


@dataclass(frozen=True)
class Case:
    """A rule, the resource it is about, and a change that breaks that resource for it."""

    rule: str
    kind: str
    prefix: str
    breaks: Callable[[Document], None]
    always_compliant_before: bool = True
    """False for a rule that can only fail or not apply (RO-IAM-5: any key fails)."""
    stack: str = "every"
    """The fixture of the stack it breaks: `every`, or `ledger` (the Valkey store's rules)."""


CASES = [
    Case(
        "RO-DEP-1",
        "google_cloudfunctions2_function",
        "report-function",
        drop_dependency("google_cloudfunctions2_function", "report-function", "apis_cloudbuild"),
    ),
    Case(
        "RO-DEP-2",
        "google_cloudfunctions2_function",
        "uploads-function",
        drop_dependency(
            "google_cloudfunctions2_function", "uploads-function", r"^time_sleep\.trigger-settled$"
        ),
    ),
    Case(
        "RO-IAM-1",
        "google_project_iam_member",
        "report-identity-runtime-ledger",
        set_at("google_project_iam_member", "report-identity-runtime-ledger", "role", "roles/editor"),
    ),
    Case(
        "RO-IAM-2",
        "google_cloud_run_v2_service_iam_member",
        "report-schedule_invoker",
        set_at("google_cloud_run_v2_service_iam_member", "report-schedule_invoker", "member", "allUsers"),
    ),
    Case(
        "RO-IAM-3",
        "google_project_iam_member",
        "report-identity-runtime-ledger",
        set_at("google_project_iam_member", "report-identity-runtime-ledger", "condition", None),
    ),
    Case("RO-IAM-4", "google_service_account", "report-identity-runtime-account", share_runtime_account),
    Case("RO-IAM-5", "google_service_account_key", "exported", export_a_key, always_compliant_before=False),
    Case("RO-IAM-6", "google_cloudfunctions2_function", "report-function", drop_gcf_source_readers),
    Case(
        "RO-IAM-7",
        "google_cloud_run_v2_service_iam_member",
        "report-schedule_invoker",
        set_at(
            "google_cloud_run_v2_service_iam_member", "report-schedule_invoker", "name", "payments-settle"
        ),
    ),
    Case(
        "RO-IAM-8",
        "google_cloud_run_v2_job_iam_member",
        "reindex-identity-target-runner",
        set_at("google_cloud_run_v2_job_iam_member", "reindex-identity-target-runner", "name", "another-job"),
    ),
    Case(
        "RO-IAM-9",
        "google_pubsub_topic_iam_member",
        "orders-events_agent-dead-letter-publisher",
        set_at(
            "google_pubsub_topic_iam_member",
            "orders-events_agent-dead-letter-publisher",
            "role",
            "roles/pubsub.editor",
        ),
    ),
    Case(
        "RO-IAM-10",
        "google_pubsub_topic_iam_member",
        "orders-events_runtime-dead-letter-publisher",
        publish_to_the_source_topic,
    ),
    Case(
        "RO-IAM-11",
        "google_cloud_scheduler_job",
        "report-schedule_job",
        drop_dependency(
            "google_cloud_scheduler_job", "report-schedule_job", r"^time_sleep\.invoker-settled$"
        ),
    ),
    Case(
        "RO-MON-1",
        "google_monitoring_notification_channel",
        "monitoring_email-",
        set_at("google_monitoring_notification_channel", "monitoring_email-", "type", "webhook_tokenauth"),
    ),
    Case(
        "RO-MON-2",
        "google_logging_metric",
        "monitoring_answers",
        set_at(
            "google_logging_metric",
            "monitoring_answers",
            "label_extractors.key",
            "EXTRACT(jsonPayload.run_key)",
        ),
    ),
    Case(
        "RO-MON-3",
        "google_monitoring_alert_policy",
        "monitoring_failed",
        set_at(
            "google_monitoring_alert_policy", "monitoring_failed", "documentation.content", "Look into it."
        ),
    ),
    Case(
        "RO-MON-4",
        "google_monitoring_alert_policy",
        "monitoring_failed",
        set_at("google_monitoring_alert_policy", "monitoring_failed", "alert_strategy", None),
    ),
    Case("RO-MON-5", "google_monitoring_alert_policy", "monitoring_store-or-config", watch_for_absence),
    Case(
        "RO-MON-6",
        "google_monitoring_alert_policy",
        "monitoring_store-or-config",
        drop_dependency(
            "google_monitoring_alert_policy",
            "monitoring_store-or-config",
            r"^time_sleep\.monitoring_metrics-settled",
        ),
    ),
    Case(
        "RO-NET-1",
        "google_cloudfunctions2_function",
        "report-function",
        set_at(
            "google_cloudfunctions2_function",
            "report-function",
            "service_config.ingress_settings",
            "ALLOW_ALL",
        ),
    ),
    Case(
        "RO-NET-2",
        "google_cloud_scheduler_job",
        "report-schedule_job",
        set_at(
            "google_cloud_scheduler_job",
            "report-schedule_job",
            "http_target.oidc_token.audience",
            "https://example.com",
        ),
    ),
    Case(
        "RO-NET-3",
        "google_pubsub_subscription",
        "orders-events_push-subscription",
        set_at(
            "google_pubsub_subscription",
            "orders-events_push-subscription",
            "push_config.oidc_token.audience",
            "https://example.com",
        ),
    ),
    Case(
        "RO-OPS-1",
        "google_project_iam_member",
        "operators_group-every-ops-example-com-ledger",
        set_at(
            "google_project_iam_member",
            "operators_group-every-ops-example-com-ledger",
            "condition.expression",
            'resource.name == "projects/acme-every-1/databases/runonce-watchdog"',
        ),
    ),
    Case(
        "RO-OPS-2",
        "google_project_iam_member",
        "operators_group-every-ops-example-com-ledger",
        drop_grants("operators_group-every-ops-example-com-job-runner"),
    ),
    Case(
        "RO-PS-1",
        "google_pubsub_subscription",
        "orders-events_push-subscription",
        set_at("google_pubsub_subscription", "orders-events_push-subscription", "expiration_policy", None),
    ),
    Case(
        "RO-STO-1",
        "google_storage_bucket",
        "build_bucket",
        set_at("google_storage_bucket", "build_bucket", "public_access_prevention", "inherited"),
    ),
    Case(
        "RO-VAL-1",
        "google_memorystore_instance",
        "valkey_instance",
        set_at(
            "google_memorystore_instance",
            "valkey_instance",
            "engine_configs",
            {"maxmemory-policy": "volatile-lru"},
        ),
        stack="ledger",
    ),
    Case(
        "RO-VAL-2",
        "google_memorystore_instance",
        "valkey_instance",
        set_at(
            "google_memorystore_instance",
            "valkey_instance",
            "transit_encryption_mode",
            "TRANSIT_ENCRYPTION_DISABLED",
        ),
        stack="ledger",
    ),
    Case(
        "RO-VAL-3",
        "google_memorystore_instance",
        "valkey_instance",
        set_at("google_memorystore_instance", "valkey_instance", "desired_auto_created_endpoints", None),
        stack="ledger",
    ),
    Case(
        "RO-VAL-4",
        "google_project_iam_member",
        "valkey_connect-function-close",
        set_at("google_project_iam_member", "valkey_connect-function-close", "condition", None),
        stack="ledger",
    ),
    Case(
        "RO-VAL-5",
        "google_memorystore_instance",
        "valkey_instance",
        set_at("google_memorystore_instance", "valkey_instance", "authorization_mode", "AUTH_DISABLED"),
        stack="ledger",
    ),
    Case(
        "RO-WDG-1",
        "google_project_iam_member",
        "watchdog_ledger-reader",
        set_at("google_project_iam_member", "watchdog_ledger-reader", "role", "roles/datastore.owner"),
    ),
    Case(
        "RO-WDG-2",
        "google_cloudfunctions2_function",
        "watchdog_function",
        set_at(
            "google_cloudfunctions2_function",
            "watchdog_function",
            "service_config.environment_variables.RUNONCE_DATABASE",
            "runonce",
        ),
    ),
    Case(
        "RO-WDG-3",
        "google_cloudfunctions2_function",
        "watchdog_function",
        drop_grants("watchdog_job-runner"),
    ),
    Case(
        "RO-WDG-4",
        "google_cloudfunctions2_function",
        "watchdog_function",
        drop_grants("watchdog_job-pauser"),
        stack="pausing",
    ),
    Case(
        "RO-WDG-5",
        "google_cloudfunctions2_function",
        "watchdog_function",
        drop_grants("operators_group-ops-example-com-job-resumer"),
        stack="pausing",
    ),
]


def test_every_rule_of_the_pack_has_a_case():
    assert [case.rule for case in CASES] == [rule.id for rule in LEAST_PRIVILEGE]


def test_the_pack_lists_its_rules_in_id_order():
    def order(rule_id: str) -> tuple[str, int]:
        family, number = rule_id.removeprefix("RO-").split("-")
        return family, int(number)

    ids = [rule.id for rule in LEAST_PRIVILEGE]
    assert ids == sorted(ids, key=order)
    assert len(set(ids)) == len(ids)


@pytest.mark.parametrize("case", CASES, ids=[case.rule for case in CASES])
def test_the_rule_finds_the_synthesized_stack_compliant_and_flags_the_broken_resource(request, case):
    rule, document = PACK[case.rule], copy.deepcopy(request.getfixturevalue(case.stack))
    before = verdicts(rule, document)
    assert Verdict.NON_COMPLIANT not in before.values()
    if case.always_compliant_before:
        address = f"{case.kind}.{named(document, case.kind, case.prefix)}"
        assert before[address] is Verdict.COMPLIANT
    case.breaks(document)
    after = verdicts(rule, document)
    assert after[f"{case.kind}.{named(document, case.kind, case.prefix)}"] is Verdict.NON_COMPLIANT


CONNECT = ("google_project_iam_member", "valkey_connect-function-close")
OTHER_INSTANCE = 'resource.name == "projects/runonce-ledger/locations/europe-west1/instances/someone-elses"'


@pytest.mark.parametrize(
    "breaks",
    [
        set_at(
            "google_project_iam_member", "team-build-log-writer", "role", "roles/memorystore.dbConnectionUser"
        ),
        set_at(*CONNECT, "condition.expression", OTHER_INSTANCE),
        set_at(*CONNECT, "role", "roles/memorystore.admin"),
    ],
    ids=[
        "connection role without a condition",
        "condition on another instance",
        "admin role on the instance",
    ],
)
def test_a_memorystore_grant_is_flagged_unless_it_is_the_connection_role_on_the_stacks_instance(
    ledger, breaks
):
    rule, document = PACK["RO-VAL-4"], copy.deepcopy(ledger)
    breaks(document)
    assert Verdict.NON_COMPLIANT in verdicts(rule, document).values()
