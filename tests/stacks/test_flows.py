"""Every value that flows from one block of a synthesized stack into another has a documented
shape (docs/stacks/shapes.md), and the consumer takes that shape.

The stacks: the example, payments, every-feature and ledger teams and the existing-Valkey fixture.
`tests/stacks/flows.py` parses their
`${...}` references; the table's rows say which (source attribute, consumer field) pairs may
occur and how the consumer writes the reference. Each consumer field's accepted shape below is
the provider's or Google's, cited in the table's source column.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from stacks.team import TEAMS_DIR, load_team_file
from stacks.validate import find_problems
from tests.stacks.conftest import Synthesized, synthesize
from tests.stacks.flows import EMBEDDED, REF, Flow, Row, documented_rows, flows, matches

EVERY_FEATURE = Path(__file__).parent / "fixtures" / "every_feature.py"
VALKEY_EXISTING = Path(__file__).parent / "fixtures" / "valkey_existing.py"
ROWS = documented_rows()

EMAIL = r"[a-z0-9-]+@[a-z0-9.-]+\.gserviceaccount\.com"
SERVICE_NAME = r"[a-z]([-a-z0-9]*[a-z0-9])?"
FULL_SERVICE = rf"projects/[^/]+/locations/[a-z0-9-]+/services/{SERVICE_NAME}"
RUN_APP = r"https://[a-z0-9-]+\.a\.run\.app"
ACCOUNT_NAME = rf"projects/[^/]+/serviceAccounts/{EMAIL}"
TOPIC = r"[A-Za-z][\w.~+%-]{2,254}"
BUCKET = r"[a-z0-9][a-z0-9._-]{1,61}[a-z0-9]"
REPOSITORY = r"[a-z][a-z0-9-]*"
REPOSITORY_PARENT = r"projects/[^/]+/locations/[a-z0-9-]+/repositories/"
NETWORK_NAME = r"[a-z]([-a-z0-9]{0,61}[a-z0-9])?"
NETWORK_PATH = rf"projects/[^/]+/global/networks/{NETWORK_NAME}"
ACCEPTED = {
    # IAM members: "serviceAccount:{emailid}" (the provider's IAM pages).
    "google_project_iam_member.member": rf"serviceAccount:{EMAIL}",
    "google_storage_bucket_iam_member.member": rf"serviceAccount:{EMAIL}",
    "google_artifact_registry_repository_iam_member.member": rf"serviceAccount:{EMAIL}",
    "google_cloud_run_v2_service_iam_member.member": rf"serviceAccount:{EMAIL}",
    "google_cloud_run_v2_job_iam_member.member": rf"serviceAccount:{EMAIL}",
    "google_pubsub_topic_iam_member.member": rf"serviceAccount:{EMAIL}",
    "google_pubsub_subscription_iam_member.member": rf"serviceAccount:{EMAIL}",
    "google_service_account_iam_member.member": rf"serviceAccount:{EMAIL}",
    # Plain emails, never members.
    "google_cloudfunctions2_function.service_config.service_account_email": EMAIL,
    "google_cloudfunctions2_function.event_trigger.service_account_email": EMAIL,
    "google_cloud_scheduler_job.http_target.oidc_token.service_account_email": EMAIL,
    "google_pubsub_subscription.push_config.oidc_token.service_account_email": EMAIL,
    "google_cloud_run_v2_service.template.service_account": EMAIL,
    # Fully-qualified account names.
    "google_cloudfunctions2_function.build_config.service_account": ACCOUNT_NAME,
    "google_service_account_iam_member.service_account_id": ACCOUNT_NAME,
    # A Cloud Run service: its full name or its short one.
    "google_cloud_run_v2_service_iam_member.name": rf"({FULL_SERVICE}|{SERVICE_NAME})",
    # The full service name into the local that keeps its last segment, the short service name
    # (the `service_name` label of cloud_run_revision), which the filters name.
    "local.monitoring_service": FULL_SERVICE,
    "google_logging_metric.filter": SERVICE_NAME,
    "google_monitoring_alert_policy.conditions.condition_matched_log.filter": SERVICE_NAME,
    "google_monitoring_dashboard.dashboard_json": SERVICE_NAME,
    # The run.app URL, as target and audience (ingress internal, Cloud Run's audience check).
    "google_cloud_scheduler_job.http_target.uri": RUN_APP,
    "google_cloud_scheduler_job.http_target.oidc_token.audience": RUN_APP,
    "google_pubsub_subscription.push_config.push_endpoint": RUN_APP,
    "google_pubsub_subscription.push_config.oidc_token.audience": RUN_APP,
    # Topics: the full path for the dead-letter topic, either form for the subscription's topic,
    # for a topic grant the short name or the full one.
    "google_pubsub_subscription.dead_letter_policy.dead_letter_topic": rf"projects/[^/]+/topics/{TOPIC}",
    "google_pubsub_subscription.topic": rf"(projects/[^/]+/topics/)?{TOPIC}",
    "google_pubsub_topic_iam_member.topic": rf"(projects/[^/]+/topics/)?{TOPIC}",
    "google_pubsub_subscription_iam_member.subscription": rf"(projects/[^/]+/subscriptions/)?{TOPIC}",
    # A Firestore database id; bucket names; repositories.
    "google_firestore_field.database": r"[a-z][a-z0-9-]{2,61}[a-z0-9]|\(default\)",
    "google_firestore_index.database": r"[a-z][a-z0-9-]{2,61}[a-z0-9]|\(default\)",
    "google_storage_bucket_object.bucket": BUCKET,
    "google_storage_bucket_iam_member.bucket": BUCKET,
    "google_cloudfunctions2_function.build_config.source.storage_source.bucket": BUCKET,
    "google_cloudfunctions2_function.build_config.docker_repository": REPOSITORY_PARENT + REPOSITORY,
    "google_artifact_registry_repository_iam_member.repository": rf"({REPOSITORY_PARENT})?{REPOSITORY}",
    "google_artifact_registry_repository_iam_member.location": r"[a-z]+(-[a-z]+[0-9]+)?",
    # Project numbers, in a bucket name and compared with a bucket's project number.
    "google_project_iam_member.condition.expression": r"[0-9]{6,}",
    "data.google_storage_bucket.lifecycle.postcondition.condition": r"[0-9]{6,}",
    "google_monitoring_alert_policy.notification_channels": r"projects/[^/]+/notificationChannels/[0-9]+",
    # A Valkey store's network (docs/stacks/stores.md): paths where the provider documents paths.
    "google_compute_subnetwork.network": NETWORK_PATH,
    "google_memorystore_instance.desired_auto_created_endpoints.network": NETWORK_PATH,
    "google_network_connectivity_service_connection_policy.network": NETWORK_PATH,
    "google_network_connectivity_service_connection_policy.psc_config.subnetworks": (
        r"projects/[^/]+/regions/[a-z0-9-]+/subnetworks/[a-z]([-a-z0-9]*[a-z0-9])?"
    ),
    "google_vpc_access_connector.network": NETWORK_NAME,
    "google_compute_firewall.network": NETWORK_NAME,
    "google_cloudfunctions2_function.service_config.vpc_connector": (
        r"projects/[^/]+/locations/[a-z0-9-]+/connectors/[a-z][-a-z0-9]{0,23}[a-z0-9]"
    ),
    # The instance's endpoints (the primary picked by type) and its CA chain, into the store's locals.
    "local.valkey_store": (
        r'\[\{(connection_type = "CONNECTION_TYPE_PRIMARY", ip_address = "[0-9.]+", port = \d+'
        r'|certificates = \["-----BEGIN CERTIFICATE-----).*\]'
    ),
    "google_cloudfunctions2_function.service_config.environment_variables.RUNONCE_STORE": (
        r"valkeys://[0-9.]+:\d+\?replicas=\d+"
    ),
    "google_cloudfunctions2_function.service_config.environment_variables.RUNONCE_STORE_CA": (
        r"-----BEGIN CERTIFICATE-----.*"
    ),
    "google_cloudfunctions2_function.service_config.environment_variables.RUNONCE_WATCHDOG_JOBS": (
        r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ"
    ),
}
"""What each consumer field takes where the reference goes, as a regular expression."""


@pytest.fixture(scope="module")
def stacks(example, payments, archive_dir) -> list[Synthesized]:
    every = load_team_file(EVERY_FEATURE)
    assert find_problems([every]) == []
    # Teams on Valkey: one creating its instance and network, one reading both.
    valkey = [load_team_file(TEAMS_DIR / "ledger.py"), load_team_file(VALKEY_EXISTING)]
    assert find_problems(valkey) == []
    return [
        example,
        payments,
        synthesize(every, archive_dir),
        *(synthesize(team, archive_dir) for team in valkey),
    ]


def _undocumented(synth: Synthesized) -> list[Flow]:
    team = synth.team
    return [
        flow
        for flow in flows(synth.document)
        if not any(matches(row, flow, team.project, team.region) for row in ROWS)
    ]


def test_the_table_documents_flows(stacks):
    assert len(ROWS) >= 40
    assert all(row.source and row.shape and row.consumer and row.written for row in ROWS)


def test_the_parser_finds_references_inside_expressions_and_longer_values():
    document = {
        "resource": {
            "google_x": {
                "a": {"f": 'x "${google_y.b.service_config[0].uri}" y', "depends_on": ["google_z.c"]}
            }
        },
        "data": {"google_w": {"d": {"c": "${tostring(self.n) == data.google_project.p.number}"}}},
    }
    assert [(f.source, f.consumer, f.reference) for f in flows(document)] == [
        ("google_y.service_config[0].uri", "google_x.f", "google_y.b.service_config[0].uri"),
        ("data.google_project.number", "data.google_w.c", "data.google_project.p.number"),
    ]


def test_every_flow_in_the_stacks_is_documented_with_the_form_it_is_written_in(stacks):
    missing = sorted(
        f"{flow.address}: {flow.source} -> {flow.consumer} written as {flow.value[:120]!r}"
        for synth in stacks
        for flow in _undocumented(synth)
    )
    assert missing == [], "add a row to docs/stacks/shapes.md for each:\n" + "\n".join(missing)


def test_an_undocumented_flow_is_found():
    row = Row(
        "google_service_account.email",
        "a@b.iam.gserviceaccount.com",
        "google_project_iam_member.member",
        "serviceAccount:${REF}",
    )
    document = {
        "resource": {"google_project_iam_member": {"g": {"member": "${google_service_account.a.email}"}}}
    }
    (flow,) = flows(document)
    # The member is the bare email: not the documented `serviceAccount:` form.
    assert not matches(row, flow, "p", "r")


def test_every_documented_flow_still_occurs(stacks):
    used = {
        row
        for synth in stacks
        for flow in flows(synth.document)
        for row in ROWS
        if matches(row, flow, synth.team.project, synth.team.region)
    }
    assert [row for row in ROWS if row not in used] == []


def _delivered(row: Row) -> str:
    """The example shape, where the consumer's value puts the reference."""
    return row.shape


@pytest.mark.parametrize(
    "row",
    [pytest.param(row, id=f"{row.source}->{row.consumer}") for row in ROWS],
)
def test_the_consumer_takes_the_documented_shape(row):
    accepted = ACCEPTED[row.consumer]
    written = row.written.strip(EMBEDDED)
    # What the field holds at apply time where REF was: the value, or the IAM member built from it.
    prefix = written.split("${" + REF + "}")[0] if "${" + REF + "}" in written else ""
    value = _delivered(row)
    if row.consumer.endswith(".member") and prefix == "serviceAccount:":
        value = prefix + value
    elif row.consumer.endswith("build_config.service_account"):
        value = f"projects/runonce-example/serviceAccounts/{value}"
    assert re.fullmatch(accepted, value), f"{row.consumer} takes {accepted}, gets {value!r}"


def test_every_consumer_field_has_an_accepted_shape():
    assert sorted({row.consumer for row in ROWS} - set(ACCEPTED)) == []


def test_ledger_conditions_name_a_database_of_the_stack(stacks):
    for synth in stacks:
        databases = {
            f"projects/{config['project']}/databases/{config['name']}"
            for config in synth.resources("google_firestore_database").values()
        }
        named = [
            re.fullmatch(r'resource\.name == "([^"]+)"', config["condition"]["expression"])
            for config in synth.resources("google_project_iam_member").values()
            if "databases/" in config.get("condition", {}).get("expression", "")
        ]
        assert named and all(found is not None and found.group(1) in databases for found in named)


def test_the_dead_letter_topic_variable_is_the_full_path_of_the_jobs_dead_letter_topic(stacks):
    checked = 0
    for synth in stacks:
        topics = {
            f"projects/{config['project']}/topics/{config['name']}"
            for config in synth.resources("google_pubsub_topic").values()
            if config["name"].endswith("-dead-letter")
        }
        for config in synth.resources("google_cloudfunctions2_function").values():
            path = config["service_config"].get("environment_variables", {}).get("RUNONCE_DEAD_LETTER_TOPIC")
            if path is not None:
                assert path in topics
                checked += 1
    assert checked >= 3
