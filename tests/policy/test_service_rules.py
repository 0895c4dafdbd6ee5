"""The pack on the every-feature stack's jobs on Cloud Run services (deployed and existing) and
App Engine: compliant as synthesized, and flagged once broken."""

from __future__ import annotations

import copy

import pytest

from policy.pack import LEAST_PRIVILEGE
from policy.verdict import Verdict
from tests.policy.test_rules import drop_dependency, named, set_at, verdicts

PACK = {rule.id: rule for rule in LEAST_PRIVILEGE}
DEPLOYED_URI = "${google_cloud_run_v2_service.closer-service.uri}"

CASES = [
    pytest.param(
        "RO-NET-2",
        "google_cloud_scheduler_job",
        "close-schedule_job",
        set_at(
            "google_cloud_scheduler_job",
            "close-schedule_job",
            "http_target.oidc_token.audience",
            f"{DEPLOYED_URI}/jobs/close",
        ),
        id="audience-with-the-path",
    ),
    pytest.param(
        "RO-NET-2",
        "google_cloud_scheduler_job",
        "reopen-schedule_job",
        set_at("google_cloud_scheduler_job", "reopen-schedule_job", "http_target.oidc_token.audience", None),
        id="audience-left-to-default-to-the-uri-with-its-path",
    ),
    pytest.param(
        "RO-NET-2",
        "google_cloud_scheduler_job",
        "invoice-schedule_job",
        set_at(
            "google_cloud_scheduler_job",
            "invoice-schedule_job",
            "http_target.uri",
            "https://billing.example.com/jobs/invoice",
        ),
        id="existing-service-called-on-a-custom-domain",
    ),
    pytest.param(
        "RO-IAM-7",
        "google_cloud_run_v2_service_iam_member",
        "invoice-schedule_invoker",
        set_at("google_cloud_run_v2_service_iam_member", "invoice-schedule_invoker", "name", "billing-api"),
        id="invoker-on-a-service-named-by-a-literal",
    ),
    pytest.param(
        "RO-IAM-11",
        "google_cloud_scheduler_job",
        "invoice-schedule_job",
        drop_dependency("google_cloud_scheduler_job", "invoice-schedule_job", r"invoker"),
        id="service-job-not-waiting-for-its-invoker-grant",
    ),
    pytest.param(
        "RO-DEP-1",
        "google_cloud_run_v2_service",
        "closer-service",
        drop_dependency("google_cloud_run_v2_service", "closer-service", r"apis_run"),
        id="deployed-service-before-the-run-api",
    ),
    pytest.param(
        "RO-NET-1",
        "google_cloud_run_v2_service",
        "closer-service",
        set_at("google_cloud_run_v2_service", "closer-service", "ingress", "INGRESS_TRAFFIC_ALL"),
        id="deployed-service-open-to-the-internet",
    ),
]


@pytest.mark.parametrize(("rule_id", "kind", "prefix", "breaks"), CASES)
def test_a_service_job_resource_is_compliant_and_flagged_once_broken(every, rule_id, kind, prefix, breaks):
    rule, document = PACK[rule_id], copy.deepcopy(every)
    address = f"{kind}.{named(document, kind, prefix)}"
    assert verdicts(rule, document)[address] is Verdict.COMPLIANT
    breaks(document)
    assert verdicts(rule, document)[address] is Verdict.NON_COMPLIANT
