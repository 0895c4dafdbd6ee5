"""One function per rule: a synthesized resource in, COMPLIANT / NON_COMPLIANT / NOT_APPLICABLE out.

Rules read Terraform JSON as cdktf writes it (`cdk.tf.json`): references are `${type.name.attr}`
strings, IAM grants are `google_*_iam_member` / `_binding` resources with `role` and `member(s)`,
explicit dependencies are `depends_on` lists of `type.name` addresses. Rules over all stacks
together (names two stacks share, state they share) are in `policy.stack_set`.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from enum import Enum
from typing import Any

from stacks.contract import DEAD_LETTER_TOPIC_VARIABLE
from stacks.defaults import INVOKER_SETTLE_SECONDS, RETIRING_ACCOUNT


class Verdict(Enum):
    """Outcome of one rule on one resource."""

    COMPLIANT = "compliant"
    NON_COMPLIANT = "non_compliant"
    NOT_APPLICABLE = "not_applicable"


@dataclass(frozen=True)
class Resource:
    """One resource of a synthesized stack, with the stack around it (for cross-resource rules)."""

    type: str
    """Terraform resource type, e.g. google_project_iam_member."""
    name: str
    """Terraform resource name (cdktf's logical id)."""
    config: Mapping[str, Any]
    """The resource's arguments."""
    stack: Mapping[str, Any]
    """The whole synthesized stack document."""

    @property
    def address(self) -> str:
        """`type.name`, as Terraform names it."""
        return f"{self.type}.{self.name}"

    @property
    def path(self) -> str:
        """The construct path (e.g. example/report-function/runtime-ledger) when cdktf recorded it."""
        return self.config.get("//", {}).get("metadata", {}).get("path", self.address)


BASIC_ROLES = {"roles/owner", "roles/editor", "roles/viewer"}
PUBLIC_MEMBERS = {"allUsers", "allAuthenticatedUsers"}
# Grants that apply to a whole project, folder or organization (not to one resource).
BROAD_IAM_TYPES = re.compile(r"^google_(project|folder|organization)_iam_(member|binding)$")
ONE_DATABASE_CONDITION = re.compile(r'^resource\.name\s*==\s*"projects/[^/"]+/databases/[^/"]+"$')
# One bucket and the objects in it (`projects/_/buckets/B/objects/O`), and nothing else.
ONE_BUCKET_CONDITION = re.compile(
    r'^resource\.name\s*==\s*"projects/_/buckets/([^/"]+)"\s*\|\|\s*'
    r'resource\.name\.startsWith\("projects/_/buckets/\1/objects/"\)$'
)
# Roles that exist only at project level and only write: log entries cannot be scoped further,
# and an Eventarc trigger's account receives events at project level only.
PROJECT_ONLY_ROLES = {"roles/logging.logWriter"}
EVENT_RECEIVER_ROLE = "roles/eventarc.eventReceiver"
PUBSUB_PUBLISHED = "google.cloud.pubsub.topic.v1.messagePublished"
# The Cloud Storage agent as the `google_storage_project_service_account` data source names it:
# the email interpolated from the project number may not exist yet (the data source's docs).
STORAGE_AGENT = re.compile(r"^\$\{data\.google_storage_project_service_account\.[^.}]+\.member\}$")
STORAGE_FINALIZED = "google.cloud.storage.object.v1.finalized"
# Arguments that make a service account the identity a component runs or calls as.
IDENTITY_ARGUMENTS = {"service_account_email", "service_account", "service_account_name"}
SERVING_TYPES = {
    "google_cloudfunctions2_function",
    "google_cloudfunctions_function",
    "google_cloud_run_v2_service",
}
OPEN_INGRESS = {"ALLOW_ALL", "INGRESS_TRAFFIC_ALL"}
INGRESS_ARGUMENTS = {"ingress_settings", "ingress"}


def _is_iam(resource: Resource) -> bool:
    """An IAM grant resource (member or binding) of any kind."""
    return bool(re.match(r"^google_.*_iam_(member|binding)$", resource.type))


def _members(resource: Resource) -> list[str]:
    """The principals an IAM member or binding grants to."""
    members = resource.config.get("members", [])
    return [resource.config["member"]] if "member" in resource.config else list(members)


def _walk(value: Any, key: str = "") -> Iterator[tuple[str, Any]]:
    """Every (argument name, value) pair inside a nested resource config."""
    if isinstance(value, Mapping):
        for child_key, child in value.items():
            if child_key != "//":
                yield from _walk(child, child_key)
    elif isinstance(value, list):
        for child in value:
            yield from _walk(child, key)
    else:
        yield key, value


def no_basic_roles(resource: Resource) -> Verdict:
    """Owner, editor and viewer grant thousands of permissions: never grant them."""
    if not _is_iam(resource):
        return Verdict.NOT_APPLICABLE
    return Verdict.NON_COMPLIANT if resource.config.get("role") in BASIC_ROLES else Verdict.COMPLIANT


def no_public_principals(resource: Resource) -> Verdict:
    """allUsers / allAuthenticatedUsers make a resource public (to anyone with a Google account)."""
    if not _is_iam(resource):
        return Verdict.NOT_APPLICABLE
    return Verdict.NON_COMPLIANT if PUBLIC_MEMBERS & set(_members(resource)) else Verdict.COMPLIANT


def role_scoped_to_one_resource(resource: Resource) -> Verdict:
    """A role is granted on one resource, or at project level with a condition naming one
    database or one bucket (with its objects)."""
    if not _is_iam(resource):
        return Verdict.NOT_APPLICABLE
    if not BROAD_IAM_TYPES.match(resource.type) or resource.config.get("role") in PROJECT_ONLY_ROLES:
        return Verdict.COMPLIANT
    if _is_target_grant(resource):  # the narrowest level the target's API offers (RO-IAM-8)
        return Verdict.COMPLIANT
    if _is_storage_trigger_grant(resource) or is_eventarc_agent_grant(resource):
        return Verdict.COMPLIANT
    if _is_trigger_invoker_grant(resource):  # before its function exists (RO-IAM-7, RO-DEP-2)
        return Verdict.COMPLIANT
    if _is_event_receiver_grant(resource):
        return Verdict.COMPLIANT
    expression = resource.config.get("condition", {}).get("expression", "").strip()
    scoped = ONE_DATABASE_CONDITION.match(expression) or ONE_BUCKET_CONDITION.match(expression)
    return Verdict.COMPLIANT if scoped else Verdict.NON_COMPLIANT


def _is_storage_trigger_grant(resource: Resource) -> bool:
    """Publisher at project level for the Cloud Storage service agent, in a stack with a Cloud
    Storage Eventarc trigger: the agent publishes to the trigger's transport topic, which
    Eventarc creates and names itself, so no narrower grant exists."""
    storage_triggers = [
        config
        for config in resource.stack.get("resource", {}).get("google_cloudfunctions2_function", {}).values()
        for event_type in _values_at(config, ("event_trigger", "event_type"))
        if event_type == STORAGE_FINALIZED
    ]
    return (
        bool(storage_triggers)
        and resource.config.get("role") == "roles/pubsub.publisher"
        and all(STORAGE_AGENT.match(member) for member in _members(resource))
    )


EVENTARC_API = "eventarc.googleapis.com"
EVENTARC_AGENT_ROLE = "roles/eventarc.serviceAgent"
SERVICE_IDENTITY_MEMBER = re.compile(r"^\$\{google_project_service_identity\.([^.}]+)\.member\}$")


def is_eventarc_agent_grant(resource: Resource) -> bool:
    """roles/eventarc.serviceAgent at project level (the only level it has) for the Eventarc
    service agent, as this stack's `google_project_service_identity` of Eventarc names it. The
    checkov runner accepts CKV_GCP_49 on this grant too."""
    identities = resource.stack.get("resource", {}).get("google_project_service_identity", {})
    members = _members(resource)
    return (
        resource.type == "google_project_iam_member"
        and resource.config.get("role") == EVENTARC_AGENT_ROLE
        and "condition" not in resource.config
        and bool(members)
        and all(
            (named := SERVICE_IDENTITY_MEMBER.match(member)) is not None
            and identities.get(named.group(1), {}).get("service") == EVENTARC_API
            for member in members
        )
    )


def _trigger_accounts(stack: Mapping[str, Any], exclude_event_type: str = "") -> set[str]:
    """The stack's service accounts that functions' Eventarc triggers deliver as (of triggers of
    any event type but `exclude_event_type`)."""
    return {
        named.group(1)
        for config in stack.get("resource", {}).get("google_cloudfunctions2_function", {}).values()
        if not exclude_event_type
        or exclude_event_type not in _values_at(config, ("event_trigger", "event_type"))
        for email in _values_at(config, ("event_trigger", "service_account_email"))
        if (named := MEMBER_ACCOUNT.search(str(email)))
    }


def _is_event_receiver_grant(resource: Resource) -> bool:
    """roles/eventarc.eventReceiver (project level only) for the accounts of Eventarc triggers
    that need it: every trigger but a Pub/Sub one, for which Eventarc says it is not needed."""
    accounts = _member_accounts(resource)
    receivers = _trigger_accounts(resource.stack, exclude_event_type=PUBSUB_PUBLISHED)
    return (
        resource.type == "google_project_iam_member"
        and resource.config.get("role") == EVENT_RECEIVER_ROLE
        and bool(accounts)
        and len(accounts) == len(_members(resource))
        and accounts <= receivers
    )


def _is_trigger_invoker_grant(resource: Resource) -> bool:
    """roles/run.invoker at project level, unconditioned, for Eventarc trigger accounts only: it
    must exist before the function whose trigger delivers as that account, when the function's
    service does not exist yet, and Cloud Run does not evaluate resource names in conditions."""
    accounts = _member_accounts(resource)
    return (
        resource.type == "google_project_iam_member"
        and resource.config.get("role") == "roles/run.invoker"
        and "condition" not in resource.config
        and bool(accounts)
        and len(accounts) == len(_members(resource))
        and accounts <= _trigger_accounts(resource.stack)
    )


# Where each resource type names the service account a component runs or calls as, and which
# component that is: a function's (or service's) runtime, a function's build, or the signer of
# a Scheduler job's or a Pub/Sub push subscription's token (an invoker). Blocks may be objects
# or lists in the JSON, `_values_at` reads both.
IDENTITY_PATHS: dict[str, dict[tuple[str, ...], str]] = {
    "google_cloudfunctions2_function": {
        ("service_config", "service_account_email"): "runtime",
        ("build_config", "service_account"): "build",
        ("event_trigger", "service_account_email"): "trigger",
    },
    "google_cloudfunctions_function": {
        ("service_account_email",): "runtime",
        ("build_service_account",): "build",
    },
    "google_cloud_run_v2_service": {("template", "service_account"): "runtime"},
    "google_cloud_run_v2_job": {("template", "template", "service_account"): "runtime"},
    "google_cloud_scheduler_job": {
        ("http_target", "oidc_token", "service_account_email"): "invoker",
        ("http_target", "oauth_token", "service_account_email"): "invoker",
    },
    "google_pubsub_subscription": {("push_config", "oidc_token", "service_account_email"): "invoker"},
}


def _values_at(value: Any, path: tuple[str, ...]) -> Iterator[Any]:
    """Every value at `path` inside a resource config (through objects and lists of blocks)."""
    if isinstance(value, list):
        for item in value:
            yield from _values_at(item, path)
    elif not path:
        yield value
    elif isinstance(value, Mapping) and path[0] in value:
        yield from _values_at(value[path[0]], path[1:])


def identity_uses(stack: Mapping[str, Any], account: str) -> set[tuple[str, str]]:
    """(component kind, resource address) of every component that runs or calls as the
    `google_service_account` named `account` ("runtime", "build", "invoker", or the resource
    type for a use this module does not classify)."""
    reference = f"${{google_service_account.{account}."
    uses: set[tuple[str, str]] = set()
    for kind, resources in stack.get("resource", {}).items():
        paths = IDENTITY_PATHS.get(kind)
        for name, config in resources.items():
            if paths is not None:
                found = [
                    role
                    for path, role in paths.items()
                    for value in _values_at(config, path)
                    if isinstance(value, str) and reference in value
                ]
            else:
                found = [
                    kind
                    for key, value in _walk(config)
                    if key in IDENTITY_ARGUMENTS and isinstance(value, str) and reference in value
                ]
            uses.update((role, f"{kind}.{name}") for role in found)
    return uses


def service_account_used_by_one_component(resource: Resource) -> Verdict:
    """Every service account serves one kind of component: a runtime account exactly one function
    (the account that holds data access is never shared), a build account only builds, an invoker
    account only signs Scheduler jobs' tokens (the team's shared build and invoker accounts serve
    many). An account nobody uses is flagged, except one kept for a migration's single apply."""
    if resource.type != "google_service_account":
        return Verdict.NOT_APPLICABLE
    uses = identity_uses(resource.stack, resource.name)
    kinds = {kind for kind, _ in uses}
    if not uses:
        retiring = resource.config.get("description") == RETIRING_ACCOUNT
        return Verdict.COMPLIANT if retiring else Verdict.NON_COMPLIANT
    if len(kinds) != 1:
        return Verdict.NON_COMPLIANT
    return Verdict.COMPLIANT if kinds != {"runtime"} or len(uses) == 1 else Verdict.NON_COMPLIANT


INVOKER_ROLES = {"roles/run.invoker", "roles/run.servicesInvoker", "roles/cloudfunctions.invoker"}
# Grants on one Cloud Run service (or gen2 function), and the argument naming it.
SERVICE_IAM_TARGETS = {
    "google_cloud_run_v2_service_iam_member": "name",
    "google_cloud_run_v2_service_iam_binding": "name",
    "google_cloud_run_service_iam_member": "service",
    "google_cloud_run_service_iam_binding": "service",
    "google_cloudfunctions2_function_iam_member": "cloud_function",
    "google_cloudfunctions2_function_iam_binding": "cloud_function",
}
# A service of this stack: the one a function created, or a Cloud Run service's own name.
OWN_SERVICE = re.compile(
    r"^\$\{(google_cloudfunctions2_function\.[^.}]+\.(service_config\[0\]\.service|name)"
    r"|google_cloud_run_v2_service\.[^.}]+\.name)\}$"
)


MEMBER_ACCOUNT = re.compile(r"\$\{google_service_account\.([^.}]+)\.(email|member)\}")


INVOKER_SIGNERS = ("google_cloud_scheduler_job", "google_pubsub_subscription")
"""The resource types whose tokens an invoker account signs."""


def _invoker_accounts(stack: Mapping[str, Any]) -> set[str]:
    """The names of the `google_service_account`s that this stack's Scheduler jobs and push
    subscriptions sign their tokens as."""
    return {
        account.group(1)
        for kind in INVOKER_SIGNERS
        for config in stack.get("resource", {}).get(kind, {}).values()
        for path in IDENTITY_PATHS[kind]
        for value in _values_at(config, path)
        if (account := MEMBER_ACCOUNT.search(str(value)))
    }


def _member_accounts(resource: Resource) -> set[str]:
    """The names of the stack's service accounts an IAM grant is to."""
    return {found.group(1) for member in _members(resource) if (found := MEMBER_ACCOUNT.search(member))}


def invoker_only_on_own_services(resource: Resource) -> Verdict:
    """The invoker role is granted on one of this stack's own services, never at project level
    (nor on a service named by a literal, another team's); and an account that Scheduler jobs or
    push subscriptions sign as holds nothing but that role."""
    if not _is_iam(resource):
        return Verdict.NOT_APPLICABLE
    invoker_role = resource.config.get("role") in INVOKER_ROLES
    invokers = _member_accounts(resource) & _invoker_accounts(resource.stack)
    if not invoker_role and not invokers:
        return Verdict.NOT_APPLICABLE
    if _is_trigger_invoker_grant(resource) and not invokers:
        return Verdict.COMPLIANT
    if not invoker_role or resource.type not in SERVICE_IAM_TARGETS:
        return Verdict.NON_COMPLIANT
    target = str(resource.config.get(SERVICE_IAM_TARGETS[resource.type], ""))
    return Verdict.COMPLIANT if OWN_SERVICE.match(target) else Verdict.NON_COMPLIANT


def no_service_account_keys(resource: Resource) -> Verdict:
    """Exported keys are long-lived secrets; components use their attached identity instead."""
    return Verdict.NON_COMPLIANT if resource.type == "google_service_account_key" else Verdict.NOT_APPLICABLE


def ingress_not_open(resource: Resource) -> Verdict:
    """Functions and Cloud Run services accept internal traffic only (no setting means open)."""
    if resource.type not in SERVING_TYPES:
        return Verdict.NOT_APPLICABLE
    settings = {value for key, value in _walk(resource.config) if key in INGRESS_ARGUMENTS}
    return Verdict.COMPLIANT if settings and not settings & OPEN_INGRESS else Verdict.NON_COMPLIANT


def bucket_private(resource: Resource) -> Verdict:
    """Buckets use uniform access (no object ACLs) and enforce public access prevention."""
    if resource.type != "google_storage_bucket":
        return Verdict.NOT_APPLICABLE
    private = resource.config.get("uniform_bucket_level_access") is True and (
        resource.config.get("public_access_prevention") == "enforced"
    )
    return Verdict.COMPLIANT if private else Verdict.NON_COMPLIANT


# The run.app URI of a gen2 function's (or a Cloud Run service's) default URL, as a reference
# or a literal: with internal-only ingress, Scheduler is internal only on that URL.
RUN_APP_URI = re.compile(
    r"^(\$\{google_cloudfunctions2_function\.[^.}]+\.service_config\[0\]\.uri\}"
    r"|\$\{google_cloud_run_v2_service\.[^.}]+\.uri\}"
    r"|https://[^/]+\.run\.app(/.*)?)$"
)


def scheduler_calls_run_app_uri(resource: Resource) -> Verdict:
    """An HTTP Scheduler job calls the run.app URI with an OIDC token whose audience is that
    URI (an absent audience defaults to it): the cloudfunctions.net URL (`function.url`) is
    not internal traffic, so an internal-only function refuses it."""
    if resource.type != "google_cloud_scheduler_job" or "http_target" not in resource.config:
        return Verdict.NOT_APPLICABLE
    target = resource.config["http_target"]
    uri = target.get("uri", "")
    token = target.get("oidc_token")
    if not RUN_APP_URI.match(uri) or not isinstance(token, Mapping):
        return Verdict.NON_COMPLIANT
    return Verdict.COMPLIANT if token.get("audience", uri) == uri else Verdict.NON_COMPLIANT


# The APIs each resource type calls that a stack enables itself. Project IAM (Cloud Resource
# Manager) and google_project_service (Service Usage) call APIs the deployer must have on
# before the first apply, so they need none. A type missing here is flagged: whoever adds a
# resource type says which API it needs.
APIS_OF_TYPE: dict[str, tuple[str, ...]] = {
    "google_project_service": (),
    "google_project_iam_member": (),
    "google_service_account": ("iam.googleapis.com",),
    "google_service_account_iam_member": ("iam.googleapis.com",),
    "google_firestore_database": ("firestore.googleapis.com",),
    "google_firestore_field": ("firestore.googleapis.com",),
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
    "google_cloud_run_v2_service_iam_member": ("run.googleapis.com",),
    "google_cloud_run_v2_job_iam_member": ("run.googleapis.com",),
    "google_cloud_scheduler_job": ("cloudscheduler.googleapis.com",),
    "google_pubsub_topic": ("pubsub.googleapis.com",),
    "google_pubsub_subscription": ("pubsub.googleapis.com",),
    "google_pubsub_topic_iam_member": ("pubsub.googleapis.com",),
    "google_pubsub_subscription_iam_member": ("pubsub.googleapis.com",),
}


def _config_at(stack: Mapping[str, Any], address: str) -> Mapping[str, Any]:
    """The config of the resource at `type.name` (empty if there is none)."""
    kind, _, name = address.partition(".")
    found = stack.get("resource", {}).get(kind, {}).get(name, {})
    return found if isinstance(found, Mapping) else {}


def depends_on_api_enablement(resource: Resource) -> Verdict:
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
    depends_on = list(resource.config.get("depends_on", []))
    for api in apis:
        enablements = {
            address
            for address in depends_on
            if address.startswith("google_project_service.")
            and _config_at(resource.stack, address).get("service") == api
        }
        waited = any(
            address.startswith("time_sleep.")
            and enablements & set(_config_at(resource.stack, address).get("depends_on", []))
            for address in depends_on
        )
        if not enablements or not waited:
            return Verdict.NON_COMPLIANT
    return Verdict.COMPLIANT


GCF_SOURCE_READER_ROLES = {"roles/storage.objectViewer", "roles/storage.objectAdmin"}
ACCOUNT_REFERENCE = re.compile(r"\$\{google_service_account\.([^.}]+)\.email\}")


def _depends_on_closure(stack: Mapping[str, Any], config: Mapping[str, Any]) -> set[str]:
    """Every address a resource depends on through `depends_on`, directly or transitively."""
    seen: set[str] = set()
    pending = list(config.get("depends_on", []))
    while pending:
        address = pending.pop()
        if address not in seen:
            seen.add(address)
            pending.extend(_config_at(stack, address).get("depends_on", []))
    return seen


def build_account_reads_gcf_sources(resource: Resource) -> Verdict:
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
        f"google_project_iam_member.{name}"
        for name, grant in resource.stack.get("resource", {}).get("google_project_iam_member", {}).items()
        if grant.get("member") == member
        and grant.get("role") in GCF_SOURCE_READER_ROLES
        and ("condition" not in grant or bucket.search(grant["condition"].get("expression", "")))
    }
    waits = {
        address
        for address in _depends_on_closure(resource.stack, resource.config)
        if address.startswith("time_sleep.")
        and grants & set(_config_at(resource.stack, address).get("depends_on", []))
    }
    return Verdict.COMPLIANT if grants and waits else Verdict.NON_COMPLIANT


# A proxy (functions/proxy, deployed for a job's Google API target) reads its target from this
# variable; its runtime account may start that target and use the ledger, nothing else. The role
# and where it is granted, per target kind (stacks/target_access.py, docs/targets.md).
TARGET_VARIABLE = "RUNONCE_TARGET"
TARGET_ROLES = {
    "workflow": "roles/workflows.invoker",
    "cloud_run_job": "roles/run.jobsExecutorWithOverrides",
    "build_trigger": "roles/cloudbuild.builds.editor",
}
TARGET_FIELDS = {"workflow": "workflow", "cloud_run_job": "job", "build_trigger": "trigger"}
"""The field of each target kind that names the resource it starts."""
TARGET_NAME = re.compile(
    r"^projects/(?P<project>[^/]+)/locations/(?P<location>[^/]+)/[a-z]+/(?P<name>[^/]+)$"
)


def _proxy_targets(stack: Mapping[str, Any]) -> dict[str, list[Mapping[str, Any]]]:
    """The targets of the stack's proxies, by the name of the runtime account each runs as (an
    unreadable target is kept as {} so that its proxy is flagged)."""
    found: dict[str, list[Mapping[str, Any]]] = {}
    for config in stack.get("resource", {}).get("google_cloudfunctions2_function", {}).values():
        raw = next(
            iter(_values_at(config, ("service_config", "environment_variables", TARGET_VARIABLE))), None
        )
        account = next(iter(_values_at(config, ("service_config", "service_account_email"))), "")
        named = MEMBER_ACCOUNT.search(str(account))
        if raw is None or named is None:
            continue
        try:
            target = json.loads(raw)
        except ValueError:
            target = {}
        found.setdefault(named.group(1), []).append(target if isinstance(target, Mapping) else {})
    return found


def _grants_target(resource: Resource, target: Mapping[str, Any]) -> bool:
    """Whether this grant is the one that lets a proxy start `target`, on the narrowest resource."""
    config, kind = resource.config, target.get("kind")
    if kind == "googleapis":
        project = _provider_project(resource.stack)
        return (
            resource.type == "google_project_iam_member"
            and config.get("role") == target.get("role")
            and config.get("project", project) == project
            and "condition" not in config
        )
    name = str(target.get(TARGET_FIELDS.get(str(kind), ""), ""))
    parts = TARGET_NAME.match(name)
    if kind not in TARGET_ROLES or parts is None or config.get("role") != TARGET_ROLES[kind]:
        return False
    if kind == "cloud_run_job":
        return resource.type == "google_cloud_run_v2_job_iam_member" and (
            config.get("project"),
            config.get("location"),
            config.get("name"),
        ) == (parts["project"], parts["location"], parts["name"])
    return resource.type == "google_project_iam_member" and config.get("project") == parts["project"]


ACT_AS_ROLE = "roles/iam.serviceAccountUser"
TRIGGER_ACCOUNT_EMAIL = re.compile(r"^[^@/]+@(?P<project>[^.@/]+)\.iam\.gserviceaccount\.com$")


def _acts_as_trigger_account(resource: Resource, target: Mapping[str, Any]) -> bool:
    """Whether this grant is actAs on the one account a build trigger target runs as
    (`service_account`), which running that trigger needs (docs/targets.md)."""
    email = str(target.get("service_account") or "")
    named = TRIGGER_ACCOUNT_EMAIL.match(email)
    return (
        target.get("kind") == "build_trigger"
        and named is not None
        and resource.type == "google_service_account_iam_member"
        and resource.config.get("role") == ACT_AS_ROLE
        and resource.config.get("service_account_id")
        == f"projects/{named['project']}/serviceAccounts/{email}"
        and "condition" not in resource.config
    )


def _target_grants_needed(target: Mapping[str, Any]) -> list[Callable[[Resource, Mapping[str, Any]], bool]]:
    """Each grant a proxy needs to start `target`: its role, and actAs on a trigger's account."""
    needed: list[Callable[[Resource, Mapping[str, Any]], bool]] = [_grants_target]
    if target.get("kind") == "build_trigger" and target.get("service_account"):
        needed.append(_acts_as_trigger_account)
    return needed


def _provider_project(stack: Mapping[str, Any]) -> str:
    providers = stack.get("provider", {}).get("google", [{}])
    return str((providers[0] if isinstance(providers, list) and providers else {}).get("project", ""))


def _is_target_grant(resource: Resource, kind: str = "") -> bool:
    """Whether this grant lets a proxy's account start its target (of `kind`, if given)."""
    targets = _proxy_targets(resource.stack)
    return any(
        grants(resource, target)
        for account in _member_accounts(resource)
        for target in targets.get(account, [])
        if not kind or target.get("kind") == kind
        for grants in _target_grants_needed(target)
    )


def is_build_trigger_grant(resource: Resource) -> bool:
    """The one grant that lets a proxy run its Cloud Build trigger: roles/cloudbuild.builds.editor
    on the trigger's project, to the account of the proxy whose RUNONCE_TARGET names that trigger
    (`stacks.target_access`). The checkov runner accepts CKV_GCP_49 on this grant only."""
    return resource.type == "google_project_iam_member" and _is_target_grant(resource, "build_trigger")


def proxy_account_holds_only_its_target(resource: Resource) -> Verdict:
    """A proxy's runtime account holds the ledger grant and the role of its one target on the
    narrowest resource the target's API offers, nothing else; and every proxy has that grant."""
    targets = _proxy_targets(resource.stack)
    if resource.type == "google_cloudfunctions2_function":
        raw = next(
            iter(_values_at(resource.config, ("service_config", "environment_variables", TARGET_VARIABLE))),
            None,
        )
        if raw is None:
            return Verdict.NOT_APPLICABLE
        account = MEMBER_ACCOUNT.search(
            str(next(iter(_values_at(resource.config, ("service_config", "service_account_email"))), ""))
        )
        if account is None:
            return Verdict.NON_COMPLIANT
        grants = [
            Resource(kind, name, config, resource.stack)
            for kind, group in resource.stack.get("resource", {}).items()
            if kind.endswith("_iam_member")
            for name, config in group.items()
        ]
        own = [grant for grant in grants if account.group(1) in _member_accounts(grant)]
        granted = all(
            any(grants(grant, target) for grant in own)
            for target in targets[account.group(1)]
            for grants in _target_grants_needed(target)
        )
        return Verdict.COMPLIANT if granted else Verdict.NON_COMPLIANT
    if not _is_iam(resource):
        return Verdict.NOT_APPLICABLE
    proxies = _member_accounts(resource) & set(targets)
    if not proxies:
        return Verdict.NOT_APPLICABLE
    ledger = resource.config.get("role") == "roles/datastore.user" and ONE_DATABASE_CONDITION.match(
        resource.config.get("condition", {}).get("expression", "").strip()
    )
    if ledger:
        return Verdict.COMPLIANT
    return Verdict.COMPLIANT if _is_target_grant(resource) else Verdict.NON_COMPLIANT


def _push_config(resource: Resource) -> Mapping[str, Any] | None:
    """The push_config of a push subscription (None for anything else, a pull subscription too)."""
    if resource.type != "google_pubsub_subscription":
        return None
    push = resource.config.get("push_config")
    push = push[0] if isinstance(push, list) and push else push
    return push if isinstance(push, Mapping) and push.get("push_endpoint") else None


def _block(config: Mapping[str, Any], name: str) -> Mapping[str, Any]:
    """A nested block written as an object or a one-element list ({} when absent)."""
    block = config.get(name)
    block = block[0] if isinstance(block, list) and block else block
    return block if isinstance(block, Mapping) else {}


def push_calls_run_app_uri(resource: Resource) -> Verdict:
    """A push subscription calls the run.app URI with an OIDC token whose audience is set to that
    URI: with internal-only ingress, Pub/Sub is internal only on the run.app URL, and an unset
    audience would default to the endpoint (with its path) rather than to the service."""
    push = _push_config(resource)
    if push is None:
        return Verdict.NOT_APPLICABLE
    uri = str(push.get("push_endpoint", ""))
    token = _block(push, "oidc_token")
    if not RUN_APP_URI.match(uri) or not token.get("service_account_email"):
        return Verdict.NON_COMPLIANT
    return Verdict.COMPLIANT if token.get("audience") == uri else Verdict.NON_COMPLIANT


MIN_DELIVERY_ATTEMPTS, MAX_DELIVERY_ATTEMPTS = 5, 100


def push_dead_letters(resource: Resource) -> Verdict:
    """A push subscription has a dead_letter_policy (5-100 attempts) to a topic of this stack,
    and never expires (`expiration_policy { ttl = "" }`): without the policy a message that
    keeps failing is redelivered until its retention ends and then lost; an expired
    subscription loses every message published after it."""
    if _push_config(resource) is None:
        return Verdict.NOT_APPLICABLE
    policy = _block(resource.config, "dead_letter_policy")
    attempts = policy.get("max_delivery_attempts")
    own_topic = str(policy.get("dead_letter_topic", "")).startswith("${google_pubsub_topic.")
    in_range = isinstance(attempts, int) and MIN_DELIVERY_ATTEMPTS <= attempts <= MAX_DELIVERY_ATTEMPTS
    never_expires = _block(resource.config, "expiration_policy").get("ttl") == ""
    return Verdict.COMPLIANT if own_topic and in_range and never_expires else Verdict.NON_COMPLIANT


PUBSUB_AGENT = re.compile(r"^serviceAccount:service-[^@]+@gcp-sa-pubsub\.iam\.gserviceaccount\.com$")
TOPIC_REFERENCE = re.compile(r"^\$\{google_pubsub_topic\.([^.}]+)\.(id|name)\}$")
SUBSCRIPTION_REFERENCE = re.compile(r"^\$\{google_pubsub_subscription\.([^.}]+)\.(id|name)\}$")
PUBSUB_GRANT_TYPES = {"google_pubsub_topic_iam_member", "google_pubsub_subscription_iam_member"}


def _dead_letter_topics(stack: Mapping[str, Any]) -> dict[str, str]:
    """The stack's dead-letter topics (by resource name), each with the push subscription using it."""
    found: dict[str, str] = {}
    for name, config in stack.get("resource", {}).get("google_pubsub_subscription", {}).items():
        topic = TOPIC_REFERENCE.match(str(_block(config, "dead_letter_policy").get("dead_letter_topic", "")))
        if topic:
            found[topic.group(1)] = name
    return found


def _pubsub_grants(stack: Mapping[str, Any]) -> list[Resource]:
    return [
        Resource(kind, name, config, stack)
        for kind in PUBSUB_GRANT_TYPES
        for name, config in stack.get("resource", {}).get(kind, {}).items()
    ]


def _granted_on(grant: Resource) -> str:
    """The resource name of the topic or subscription a Pub/Sub grant is on ("" for a literal)."""
    pattern, field = (
        (TOPIC_REFERENCE, "topic")
        if grant.type == "google_pubsub_topic_iam_member"
        else (SUBSCRIPTION_REFERENCE, "subscription")
    )
    found = pattern.match(str(grant.config.get(field, "")))
    return found.group(1) if found else ""


def _agent_grant_is_needed(grant: Resource) -> bool:
    """Publisher on a dead-letter topic, or subscriber on a subscription that dead-letters."""
    role, on = grant.config.get("role"), _granted_on(grant)
    if grant.type == "google_pubsub_topic_iam_member":
        return role == "roles/pubsub.publisher" and on in _dead_letter_topics(grant.stack)
    return role == "roles/pubsub.subscriber" and on in _dead_letter_topics(grant.stack).values()


TOKEN_CREATOR = "roles/iam.serviceAccountTokenCreator"
ACCOUNT_NAME = re.compile(r"^\$\{google_service_account\.([^.}]+)\.name\}$")


def _push_signer(config: Mapping[str, Any]) -> str:
    """The name of the `google_service_account` a push subscription signs its OIDC tokens as
    ("" for a pull subscription, a push without a token, or an account named by a literal)."""
    push = _block(config, "push_config")
    email = _block(push, "oidc_token").get("service_account_email", "") if push.get("push_endpoint") else ""
    found = MEMBER_ACCOUNT.search(str(email))
    return found.group(1) if found else ""


def _trigger_signer(config: Mapping[str, Any]) -> str:
    """The name of the `google_service_account` a gen2 function's Eventarc trigger signs its
    pushes' tokens as ("" without an `event_trigger`, or for an account named by a literal)."""
    email = _block(config, "event_trigger").get("service_account_email", "")
    found = MEMBER_ACCOUNT.search(str(email))
    return found.group(1) if found else ""


def _signers(stack: Mapping[str, Any]) -> set[str]:
    """Every `google_service_account` of the stack that push subscriptions or Eventarc triggers
    sign their OIDC tokens as."""
    resources = stack.get("resource", {})
    pushes = {_push_signer(config) for config in resources.get("google_pubsub_subscription", {}).values()}
    triggers = {
        _trigger_signer(config) for config in resources.get("google_cloudfunctions2_function", {}).values()
    }
    return (pushes | triggers) - {""}


def _agent_token_grants(stack: Mapping[str, Any], account: str) -> set[str]:
    """The grants of token creator to the Pub/Sub service agent on the `google_service_account`
    named `account` itself (addresses)."""
    return {
        f"google_service_account_iam_member.{name}"
        for name, grant in stack.get("resource", {}).get("google_service_account_iam_member", {}).items()
        if grant.get("role") == TOKEN_CREATOR
        and (found := ACCOUNT_NAME.match(str(grant.get("service_account_id", "")))) is not None
        and found.group(1) == account
        and all(PUBSUB_AGENT.match(member) for member in _members(Resource("", name, grant, stack)))
    }


def _dead_lettering_granted(resource: Resource) -> bool:
    """Publisher on the subscription's dead-letter topic and subscriber on the subscription, both
    for the service agent."""
    topic = TOPIC_REFERENCE.match(
        str(_block(resource.config, "dead_letter_policy").get("dead_letter_topic", ""))
    )
    agent = [g for g in _pubsub_grants(resource.stack) if any(PUBSUB_AGENT.match(m) for m in _members(g))]
    publishes = any(
        g.type == "google_pubsub_topic_iam_member"
        and g.config.get("role") == "roles/pubsub.publisher"
        and topic is not None
        and _granted_on(g) == topic.group(1)
        for g in agent
    )
    subscribes = any(
        g.type == "google_pubsub_subscription_iam_member"
        and g.config.get("role") == "roles/pubsub.subscriber"
        and _granted_on(g) == resource.name
        for g in agent
    )
    return publishes and subscribes


def pubsub_agent_forwards_dead_letters(resource: Resource) -> Verdict:
    """The Pub/Sub service agent holds publisher on each dead-letter topic and subscriber on each
    subscription that dead-letters into it (dead-lettering needs both); token creator on each
    account a push subscription or an Eventarc trigger signs its OIDC tokens as, on that account
    (a project created on or before April 8, 2021 needs it to sign), and the subscription or the
    triggered function depends on that grant; and nothing else (no project-level token creator
    either)."""
    if resource.type == "google_cloudfunctions2_function":
        signer = _trigger_signer(resource.config)
        if not signer:
            return Verdict.NOT_APPLICABLE
        waits = _agent_token_grants(resource.stack, signer) & _depends_on_closure(
            resource.stack, resource.config
        )
        return Verdict.COMPLIANT if waits else Verdict.NON_COMPLIANT
    if resource.type == "google_pubsub_subscription":
        dead_letters = bool(_block(resource.config, "dead_letter_policy"))
        signer = _push_signer(resource.config)
        if not dead_letters and not signer:
            return Verdict.NOT_APPLICABLE
        if dead_letters and not _dead_lettering_granted(resource):
            return Verdict.NON_COMPLIANT
        if signer and not _agent_token_grants(resource.stack, signer) & _depends_on_closure(
            resource.stack, resource.config
        ):
            return Verdict.NON_COMPLIANT
        return Verdict.COMPLIANT
    if not _is_iam(resource) or not any(PUBSUB_AGENT.match(m) for m in _members(resource)):
        return Verdict.NOT_APPLICABLE
    if resource.type == "google_service_account_iam_member":
        needed = any(
            resource.address in _agent_token_grants(resource.stack, s) for s in _signers(resource.stack)
        )
    else:
        needed = resource.type in PUBSUB_GRANT_TYPES and _agent_grant_is_needed(resource)
    return Verdict.COMPLIANT if needed else Verdict.NON_COMPLIANT


def _runtime_accounts_by_uri(stack: Mapping[str, Any]) -> dict[str, str]:
    """Each function's runtime account (resource name), by the references to its URLs."""
    found: dict[str, str] = {}
    for name, config in stack.get("resource", {}).get("google_cloudfunctions2_function", {}).items():
        account = next(iter(_values_at(config, ("service_config", "service_account_email"))), "")
        named = MEMBER_ACCOUNT.search(str(account))
        if named:  # either URL reaches the function (RO-NET-3 tells which one to use)
            for attribute in ("service_config[0].uri", "url"):
                found[f"${{google_cloudfunctions2_function.{name}.{attribute}}}"] = named.group(1)
    return found


def _runs_as(config: Mapping[str, Any], account: str) -> bool:
    """Whether a function's runtime account is the `google_service_account` named `account`."""
    return any(
        (found := MEMBER_ACCOUNT.search(str(value))) is not None and found.group(1) == account
        for value in _values_at(config, ("service_config", "service_account_email"))
    )


def _dead_letter_paths(stack: Mapping[str, Any], account: str) -> set[str]:
    """The dead-letter topics (RUNONCE_DEAD_LETTER_TOPIC) of the functions running as `account`."""
    return {
        str(path)
        for config in stack.get("resource", {}).get("google_cloudfunctions2_function", {}).values()
        if _runs_as(config, account)
        for path in _values_at(
            config, ("service_config", "environment_variables", DEAD_LETTER_TOPIC_VARIABLE)
        )
    }


def runtime_publishes_only_its_dead_letters(resource: Resource) -> Verdict:
    """An event function's runtime account holds publisher on its own dead-letter topic (the one
    its RUNONCE_DEAD_LETTER_TOPIC names), and no other Pub/Sub grant: it must not publish into
    another job's dead letters or the source topic, nor read or consume any subscription."""
    if resource.type not in PUBSUB_GRANT_TYPES:
        return Verdict.NOT_APPLICABLE
    runtimes = set(_runtime_accounts_by_uri(resource.stack).values())
    accounts = _member_accounts(resource) & runtimes
    if not accounts:
        return Verdict.NOT_APPLICABLE
    if (
        resource.type != "google_pubsub_topic_iam_member"
        or resource.config.get("role") != "roles/pubsub.publisher"
    ):
        return Verdict.NON_COMPLIANT
    topic = _config_at(resource.stack, f"google_pubsub_topic.{_granted_on(resource)}")
    project = topic.get("project") or _provider_project(resource.stack)
    path = f"projects/{project}/topics/{topic.get('name', '')}"
    own = all(_dead_letter_paths(resource.stack, account) == {path} for account in accounts)
    return Verdict.COMPLIANT if topic and own else Verdict.NON_COMPLIANT


# The endpoint a Scheduler job or push subscription calls, as a reference to a function of this
# stack (either of its URLs) or to a Cloud Run service, and the grant target naming its service.
CALLED_FUNCTION = re.compile(
    r"^\$\{google_cloudfunctions2_function\.([^.}]+)\.(service_config\[0\]\.uri|url)\}$"
)
CALLED_SERVICE = re.compile(r"^\$\{google_cloud_run_v2_service\.([^.}]+)\.uri\}$")
DURATION = re.compile(r"^(?:(\d+)h)?(?:(\d+)m)?(?:(\d+)s)?$")


def _seconds(duration: Any) -> int:
    """A time_sleep duration ("120s", "2m", "1m30s") in seconds (0 if unreadable)."""
    found = DURATION.match(str(duration))
    if not found or not str(duration):
        return 0
    hours, minutes, secs = (int(part or 0) for part in found.groups())
    return hours * 3600 + minutes * 60 + secs


def _call(resource: Resource) -> tuple[str, str] | None:
    """(endpoint, signer account name) of a Scheduler job or push subscription that calls with an
    OIDC token signed by an account of this stack; None for anything else."""
    if resource.type == "google_cloud_scheduler_job":
        target = _block(resource.config, "http_target")
        endpoint = str(target.get("uri", ""))
        email = _block(target, "oidc_token").get("service_account_email", "")
    elif resource.type == "google_pubsub_subscription":
        push = _block(resource.config, "push_config")
        endpoint = str(push.get("push_endpoint", ""))
        email = _block(push, "oidc_token").get("service_account_email", "")
    else:
        return None
    signer = MEMBER_ACCOUNT.search(str(email))
    return (endpoint, signer.group(1)) if endpoint and signer else None


def caller_waits_for_its_invoker_grant(resource: Resource) -> Verdict:
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
        target = f"${{google_cloud_run_v2_service.{service.group(1)}.name}}"
    else:
        return Verdict.NOT_APPLICABLE
    grants = {
        f"{kind}.{name}"
        for kind, field in SERVICE_IAM_TARGETS.items()
        for name, grant in resource.stack.get("resource", {}).get(kind, {}).items()
        if grant.get("role") in INVOKER_ROLES
        and str(grant.get(field, "")) == target
        and signer in _member_accounts(Resource(kind, name, grant, resource.stack))
    }
    depends_on = set(resource.config.get("depends_on", []))
    waits = {
        address
        for address in depends_on
        if address.startswith("time_sleep.")
        and grants & set(_config_at(resource.stack, address).get("depends_on", []))
        and _seconds(_config_at(resource.stack, address).get("create_duration")) >= INVOKER_SETTLE_SECONDS
    }
    return Verdict.COMPLIANT if grants & depends_on and waits else Verdict.NON_COMPLIANT


def triggered_function_waits_for_agent_and_invoker(resource: Resource) -> Verdict:
    """A function with an Eventarc trigger depends on a time_sleep of at least the typical IAM
    propagation time (2 minutes) that follows the Eventarc service agent's role grant and its
    trigger account's invoker grant: on a fresh project the trigger is refused until the agent
    has its role, and every delivery until the invoker grant is in effect."""
    if resource.type != "google_cloudfunctions2_function":
        return Verdict.NOT_APPLICABLE
    emails = list(_values_at(resource.config, ("event_trigger", "service_account_email")))
    if not list(_values_at(resource.config, ("event_trigger",))):
        return Verdict.NOT_APPLICABLE
    account = MEMBER_ACCOUNT.search(str(emails[0])) if emails else None
    if account is None:
        return Verdict.NON_COMPLIANT
    grants = [
        (
            f"google_project_iam_member.{name}",
            Resource("google_project_iam_member", name, grant, resource.stack),
        )
        for name, grant in resource.stack.get("resource", {}).get("google_project_iam_member", {}).items()
    ]
    agent = {address for address, grant in grants if is_eventarc_agent_grant(grant)}
    invoker = {
        address
        for address, grant in grants
        if _is_trigger_invoker_grant(grant) and account.group(1) in _member_accounts(grant)
    }
    waited = any(
        address.startswith("time_sleep.")
        and _seconds(_config_at(resource.stack, address).get("create_duration")) >= INVOKER_SETTLE_SECONDS
        and agent & set(_config_at(resource.stack, address).get("depends_on", []))
        and invoker & set(_config_at(resource.stack, address).get("depends_on", []))
        for address in resource.config.get("depends_on", [])
    )
    return Verdict.COMPLIANT if waited else Verdict.NON_COMPLIANT
