"""The operators' policy rules (policy/rules/operators.py) on the every-feature stack, whose team has
one operator: each of its grants is one the runonce verbs need, and it holds all of them; the
job runner at project level passes RO-IAM-3 for an operator only."""

from __future__ import annotations

import copy

import pytest

from policy.pack import LEAST_PRIVILEGE
from policy.verdict import Verdict
from tests.policy.test_rules import config, named, verdicts

PACK = {rule.id: rule for rule in LEAST_PRIVILEGE}
OPERATOR = "group:every-ops@example.com"
PREFIX = "operators_group-every-ops-example-com"


def operator_grants(document) -> dict[str, dict]:
    return {
        f"{kind}.{name}": grant
        for kind, grants in document["resource"].items()
        if kind.endswith("_iam_member")
        for name, grant in grants.items()
        if grant.get("member") == OPERATOR
    }


def test_the_operators_grants_are_the_verbs_and_all_of_them(every):
    grants = operator_grants(every)
    # The ledger, the job runner and the Scheduler viewer, and for each of the three event jobs its
    # dead letters; the two with a topic (the push job and the Eventarc topic job) their topic.
    assert sorted((address.split(".")[0], grant["role"]) for address, grant in grants.items()) == sorted(
        [
            ("google_project_iam_member", "roles/datastore.user"),
            ("google_project_iam_member", "roles/cloudscheduler.jobRunner"),
            ("google_project_iam_member", "roles/cloudscheduler.viewer"),
            *[("google_pubsub_subscription_iam_member", "roles/pubsub.subscriber")] * 3,
            *[("google_pubsub_topic_iam_member", "roles/pubsub.publisher")] * 2,
        ]
    )
    for rule in ("RO-OPS-1", "RO-OPS-2", "RO-IAM-3"):
        found = verdicts(PACK[rule], every)
        assert {found[address] for address in grants} == {Verdict.COMPLIANT}, rule


def break_grant(document, kind: str, suffix: str, key: str, value) -> str:
    grant = config(document, kind, f"{PREFIX}-{suffix}")
    if value is None:
        del grant[key]
    else:
        grant[key] = value
    return f"{kind}.{named(document, kind, f'{PREFIX}-{suffix}')}"


@pytest.mark.parametrize(
    ("kind", "suffix", "key", "value"),
    [
        ("google_project_iam_member", "ledger", "role", "roles/datastore.owner"),
        ("google_project_iam_member", "ledger", "condition", None),
        ("google_project_iam_member", "job-runner", "role", "roles/cloudscheduler.admin"),
        ("google_project_iam_member", "job-runner", "condition", {"title": "t", "expression": "true"}),
        ("google_project_iam_member", "scheduler-viewer", "role", "roles/cloudscheduler.admin"),
        ("google_pubsub_subscription_iam_member", "orders-dead-letters", "role", "roles/pubsub.editor"),
        ("google_pubsub_topic_iam_member", "orders-topic", "topic", "projects/acme-every-1/topics/other"),
    ],
)
def test_an_operator_grant_beyond_the_verbs_is_flagged(every, kind, suffix, key, value):
    document = copy.deepcopy(every)
    address = break_grant(document, kind, suffix, key, value)
    assert verdicts(PACK["RO-OPS-1"], document)[address] is Verdict.NON_COMPLIANT


def test_subscriber_on_a_push_subscription_is_not_a_dead_letter_grant(every):
    document = copy.deepcopy(every)
    push = named(document, "google_pubsub_subscription", "orders-events_push-subscription")
    address = break_grant(
        document,
        "google_pubsub_subscription_iam_member",
        "orders-dead-letters",
        "subscription",
        f"${{google_pubsub_subscription.{push}.name}}",
    )
    assert verdicts(PACK["RO-OPS-1"], document)[address] is Verdict.NON_COMPLIANT


def test_publisher_on_a_dead_letter_topic_is_not_a_replay_grant(every):
    document = copy.deepcopy(every)
    dead = named(document, "google_pubsub_topic", "orders-events_dead-letter-topic")
    address = break_grant(
        document,
        "google_pubsub_topic_iam_member",
        "orders-topic",
        "topic",
        f"${{google_pubsub_topic.{dead}.name}}",
    )
    assert verdicts(PACK["RO-OPS-1"], document)[address] is Verdict.NON_COMPLIANT


@pytest.mark.parametrize(
    ("kind", "suffix"),
    [
        ("google_pubsub_subscription_iam_member", "orders-dead-letters"),  # one dead-letter subscription
        ("google_project_iam_member", "scheduler-viewer"),  # backfill could not read the Scheduler job
    ],
)
def test_an_operator_missing_one_grant_is_flagged_on_all_its_grants(every, kind, suffix):
    document = copy.deepcopy(every)
    del document["resource"][kind][named(document, kind, f"{PREFIX}-{suffix}")]
    found = verdicts(PACK["RO-OPS-2"], document)
    assert {found[address] for address in operator_grants(document)} == {Verdict.NON_COMPLIANT}


def test_the_project_wide_job_runner_passes_ro_iam_3_for_an_operator_only(every):
    document = copy.deepcopy(every)
    address = break_grant(
        document,
        "google_project_iam_member",
        "job-runner",
        "member",
        "serviceAccount:${google_service_account.team-build-account.email}",
    )
    assert verdicts(PACK["RO-IAM-3"], document)[address] is Verdict.NON_COMPLIANT


def test_grants_to_the_stacks_own_accounts_are_not_the_operators_rules_concern(every):
    for rule in ("RO-OPS-1", "RO-OPS-2"):
        found = verdicts(PACK[rule], every)
        judged = {address for address, verdict in found.items() if verdict is not Verdict.NOT_APPLICABLE}
        assert judged == set(operator_grants(every)), rule
