"""Deploy-order rules: on a fresh project every resource waits for the APIs it calls and for the
grants it needs, through `depends_on` and a `time_sleep`, so the first apply succeeds."""

from __future__ import annotations

import re
from typing import Any

from policy.grants import (
    INVOKER_ROLES,
    SERVICE_IAM_TARGETS,
    is_eventarc_agent_grant,
    is_trigger_invoker_grant,
)
from policy.synthesized import Resource, Stack, account_named, block, values_at
from policy.verdict import Verdict

# IAM: changes to allow policies "typically propagate in 2 minutes"
# (https://cloud.google.com/iam/docs/access-change-propagation): the least a caller waits after
# the grant it calls with.
IAM_PROPAGATION_SECONDS = 120
# The APIs each resource type calls that a stack enables itself. Project IAM (Cloud Resource
# Manager) and google_project_service (Service Usage) call APIs the deployer must have on
# before the first apply, so they need none. A type missing here is flagged: whoever adds a
# resource type says which API it needs.
APIS_OF_TYPE: dict[str, tuple[str, ...]] = {
    "google_project_service": (),
    "google_project_iam_member": (),
    "google_project_iam_custom_role": ("iam.googleapis.com",),
    "google_service_account": ("iam.googleapis.com",),
    "google_service_account_iam_member": ("iam.googleapis.com",),
    "google_firestore_database": ("firestore.googleapis.com",),
    "google_firestore_field": ("firestore.googleapis.com",),
    "google_firestore_index": ("firestore.googleapis.com",),
    "google_storage_bucket": ("storage.googleapis.com",),
    "google_storage_bucket_object": ("storage.googleapis.com",),
    "google_storage_bucket_iam_member": ("storage.googleapis.com",),
    "google_artifact_registry_repository": ("artifactregistry.googleapis.com",),
    "google_artifact_registry_repository_iam_member": ("artifactregistry.googleapis.com",),
    "google_cloudfunctions2_function": (
        "cloudfunctions.googleapis.com",
        "run.googleapis.com",
        "cloudbuild.googleapis.com",
    ),
    "google_cloud_run_v2_service": ("run.googleapis.com",),
    "google_cloud_run_v2_service_iam_member": ("run.googleapis.com",),
    "google_cloud_run_v2_job_iam_member": ("run.googleapis.com",),
    "google_cloud_scheduler_job": ("cloudscheduler.googleapis.com",),
    "google_pubsub_topic": ("pubsub.googleapis.com",),
    "google_pubsub_subscription": ("pubsub.googleapis.com",),
    "google_pubsub_topic_iam_member": ("pubsub.googleapis.com",),
    "google_pubsub_subscription_iam_member": ("pubsub.googleapis.com",),
    "google_logging_metric": ("logging.googleapis.com",),
    "google_monitoring_alert_policy": ("monitoring.googleapis.com",),
    "google_monitoring_notification_channel": ("monitoring.googleapis.com",),
    "google_monitoring_dashboard": ("monitoring.googleapis.com",),
    "google_compute_network": ("compute.googleapis.com",),
    "google_compute_subnetwork": ("compute.googleapis.com",),
    "google_compute_firewall": ("compute.googleapis.com",),
    "google_network_connectivity_service_connection_policy": (
        "networkconnectivity.googleapis.com",
        "serviceconsumermanagement.googleapis.com",
    ),
    "google_memorystore_instance": ("memorystore.googleapis.com",),
    "google_vpc_access_connector": ("vpcaccess.googleapis.com",),
}
GCF_SOURCE_READER_ROLES = {"roles/storage.objectViewer", "roles/storage.objectAdmin"}
ACCOUNT_REFERENCE = re.compile(r"\$\{google_service_account\.([^.}]+)\.email\}")
# The endpoint a Scheduler job or push subscription calls, as a reference to a function of this
# stack (either of its URLs) or to a Cloud Run service, and the grant target naming its service.
CALLED_FUNCTION = re.compile(
    r"^\$\{google_cloudfunctions2_function\.([^.}]+)\.(service_config\[0\]\.uri|url)\}$"
)
# A service job calls a path of its service: `${...uri}/jobs/close`; an existing service is read
# with the data source (`data.google_cloud_run_v2_service`).
CALLED_SERVICE = re.compile(r"^\$\{((?:data\.)?google_cloud_run_v2_service\.[^.}]+)\.uri\}(/\S*)?$")


def depends_on_api_enablement(resource: Resource, stack: Stack) -> Verdict:
    """A resource depends on the `google_project_service` of every API it calls, and on a
    `time_sleep` after that enablement: enabling is eventually consistent, so on a fresh
    project a resource created the moment its API reports enabled can still be refused."""
    if not resource.type.startswith("google_"):
        return Verdict.NOT_APPLICABLE
    if resource.type == "google_project_service_identity":  # the identity of its `service`
        apis: tuple[str, ...] = (str(resource.config.get("service", "")),)
    elif resource.type in APIS_OF_TYPE:
        apis = APIS_OF_TYPE[resource.type]
    else:
        return Verdict.NON_COMPLIANT
    for api in apis:
        enablements = {
            address
            for address in resource.depends_on
            if address.startswith("google_project_service.")
            and stack.config_at(address).get("service") == api
        }
        if not enablements or not stack.sleeps_after(resource, enablements):
            return Verdict.NON_COMPLIANT
    return Verdict.COMPLIANT


def build_account_reads_gcf_sources(resource: Resource, stack: Stack) -> Verdict:
    """A gen2 function built as its own account: that account may read Google's
    gcf-v2-sources-PROJECT_NUMBER-REGION bucket of the function's region (project grant,
    unconditioned or conditioned to that bucket), and the function waits, through a
    `time_sleep`, until that grant has settled (provider issue 20571)."""
    if resource.type != "google_cloudfunctions2_function":
        return Verdict.NOT_APPLICABLE
    build_account = resource.config.get("build_config", {}).get("service_account", "")
    account = ACCOUNT_REFERENCE.search(str(build_account))
    if account is None:
        return Verdict.NOT_APPLICABLE
    member = f"serviceAccount:${{google_service_account.{account.group(1)}.email}}"
    bucket = re.compile(
        rf'projects/_/buckets/gcf-v2-sources-[^/"]+-{re.escape(str(resource.config.get("location", "")))}"'
    )
    grants = {
        grant.address
        for grant in stack.of_type("google_project_iam_member")
        if grant.config.get("member") == member
        and grant.role in GCF_SOURCE_READER_ROLES
        and (
            "condition" not in grant.config or bucket.search(grant.config["condition"].get("expression", ""))
        )
    }
    waits = {
        address
        for address in stack.depends_on_closure(resource)
        if address.startswith("time_sleep.") and grants & set(stack.config_at(address).get("depends_on", []))
    }
    return Verdict.COMPLIANT if grants and waits else Verdict.NON_COMPLIANT


def _call(resource: Resource) -> tuple[str, str] | None:
    """(endpoint, signer account name) of a Scheduler job or push subscription that calls with an
    OIDC token signed by an account of this stack; None for anything else."""
    if resource.type == "google_cloud_scheduler_job":
        target = block(resource.config, "http_target")
        endpoint = str(target.get("uri", ""))
        email: Any = block(target, "oidc_token").get("service_account_email", "")
    elif resource.type == "google_pubsub_subscription":
        push = block(resource.config, "push_config")
        endpoint = str(push.get("push_endpoint", ""))
        email = block(push, "oidc_token").get("service_account_email", "")
    else:
        return None
    signer = account_named(email)
    return (endpoint, signer) if endpoint and signer else None


def caller_waits_for_its_invoker_grant(resource: Resource, stack: Stack) -> Verdict:
    """A Scheduler job or push subscription calling a service of this stack depends on its
    signer's invoker grant on that service, and on a time_sleep of at least the typical IAM
    propagation time (2 minutes) after that grant: until the grant is in effect every call is
    refused. Calls to an endpoint named by a literal are not this rule's (RO-NET-2/3)."""
    call = _call(resource)
    if call is None:
        return Verdict.NOT_APPLICABLE
    endpoint, signer = call
    function, service = CALLED_FUNCTION.match(endpoint), CALLED_SERVICE.match(endpoint)
    if function:
        target = f"${{google_cloudfunctions2_function.{function.group(1)}.service_config[0].service}}"
    elif service:
        target = f"${{{service.group(1)}.name}}"
    else:
        return Verdict.NOT_APPLICABLE
    grants = {
        grant.address
        for kind, field in SERVICE_IAM_TARGETS.items()
        for grant in stack.of_type(kind)
        if grant.role in INVOKER_ROLES
        and str(grant.config.get(field, "")) == target
        and signer in grant.member_accounts
    }
    waits = stack.sleeps_after(resource, grants, IAM_PROPAGATION_SECONDS)
    return Verdict.COMPLIANT if grants & set(resource.depends_on) and waits else Verdict.NON_COMPLIANT


def triggered_function_waits_for_agent_and_invoker(resource: Resource, stack: Stack) -> Verdict:
    """A function with an Eventarc trigger depends on a time_sleep of at least the typical IAM
    propagation time (2 minutes) that follows the Eventarc service agent's role grant and its
    trigger account's invoker grant: on a fresh project the trigger is refused until the agent
    has its role, and every delivery until the invoker grant is in effect."""
    if resource.type != "google_cloudfunctions2_function":
        return Verdict.NOT_APPLICABLE
    if not list(values_at(resource.config, ("event_trigger",))):
        return Verdict.NOT_APPLICABLE
    emails = list(values_at(resource.config, ("event_trigger", "service_account_email")))
    account = account_named(emails[0]) if emails else ""
    if not account:
        return Verdict.NON_COMPLIANT
    grants = stack.of_type("google_project_iam_member")
    agent = {grant.address for grant in grants if is_eventarc_agent_grant(grant, stack)}
    invoker = {
        grant.address
        for grant in grants
        if is_trigger_invoker_grant(grant, stack) and account in grant.member_accounts
    }
    waited = stack.sleeps_after(resource, agent, IAM_PROPAGATION_SECONDS) & stack.sleeps_after(
        resource, invoker, IAM_PROPAGATION_SECONDS
    )
    return Verdict.COMPLIANT if waited else Verdict.NON_COMPLIANT
