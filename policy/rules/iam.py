"""IAM rules: which roles are granted, on what, to whom, and which account serves which component."""

from __future__ import annotations

import re

from policy.grants import (
    INVOKER_ROLES,
    LEDGER_ROLE,
    ONE_DATABASE_CONDITION,
    SERVICE_IAM_TARGETS,
    TARGET_PATH,
    is_service_agent_grant,
    is_target_grant,
    is_trigger_invoker_grant,
    proxy_targets,
    target_grants_needed,
    trigger_accounts,
)
from policy.rules.operators import is_operator, is_resumer
from policy.rules.watchdog import is_catch_up_runner, is_pauser
from policy.synthesized import MEMBER_ACCOUNT, Resource, Stack, account_named, first_at, values_at, walk
from policy.verdict import Verdict
from stacks.contract import RETIRING_ACCOUNT

BASIC_ROLES = {"roles/owner", "roles/editor", "roles/viewer"}
PUBLIC_MEMBERS = {"allUsers", "allAuthenticatedUsers"}
# Grants that apply to a whole project, folder or organization (not to one resource).
BROAD_IAM_TYPES = re.compile(r"^google_(project|folder|organization)_iam_(member|binding)$")
# One bucket and the objects in it (`projects/_/buckets/B/objects/O`), and nothing else.
ONE_BUCKET_CONDITION = re.compile(
    r'^resource\.name\s*==\s*"projects/_/buckets/([^/"]+)"\s*\|\|\s*'
    r'resource\.name\.startsWith\("projects/_/buckets/\1/objects/"\)$'
)
ONE_INSTANCE_CONDITION = re.compile(
    r'^resource\.name\s*==\s*"projects/[^/"]+/locations/[^/"]+/instances/[^/"]+"$'
)
"""One Memorystore instance (RO-VAL-4 checks it is the stack's own)."""
# Roles that exist only at project level and only write: log entries cannot be scoped further,
# and an Eventarc trigger's account receives events at project level only.
PROJECT_ONLY_ROLES = {"roles/logging.logWriter"}
# Scheduler's IAM is managed at project level only, and IAM Conditions do not reach its jobs: an
# operator's job runner and viewer (RO-OPS-1 checks who holds them) and a catching-up watchdog's
# job runner (RO-WDG-1) cannot be granted narrower; nor can the pauser and resumer custom roles
# (RO-WDG-1, RO-WDG-5).
SCHEDULER_PROJECT_ONLY_ROLES = {"roles/cloudscheduler.jobRunner", "roles/cloudscheduler.viewer"}
EVENT_RECEIVER_ROLE = "roles/eventarc.eventReceiver"
PUBSUB_PUBLISHED = "google.cloud.pubsub.topic.v1.messagePublished"
# The Cloud Storage agent as the `google_storage_project_service_account` data source names it:
# the email interpolated from the project number may not exist yet (the data source's docs).
STORAGE_AGENT = re.compile(r"^\$\{data\.google_storage_project_service_account\.[^.}]+\.member\}$")
STORAGE_FINALIZED = "google.cloud.storage.object.v1.finalized"
# Arguments that make a service account the identity a component runs or calls as.
IDENTITY_ARGUMENTS = {"service_account_email", "service_account", "service_account_name"}
# Where each resource type names the service account a component runs or calls as, and which
# component that is: a function's (or service's) runtime, a function's build, or the signer of
# a Scheduler job's or a Pub/Sub push subscription's token (an invoker). Blocks may be objects
# or lists in the JSON, `values_at` reads both.
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
INVOKER_SIGNERS = ("google_cloud_scheduler_job", "google_pubsub_subscription")
"""The resource types whose tokens an invoker account signs."""
# A service of this stack: the one a function created, or a Cloud Run service's own name.
OWN_SERVICE = re.compile(
    r"^\$\{(google_cloudfunctions2_function\.[^.}]+\.(service_config\[0\]\.service|name)"
    r"|(data\.)?google_cloud_run_v2_service\.[^.}]+\.name)\}$"
)


def no_basic_roles(resource: Resource, _stack: Stack) -> Verdict:
    """Owner, editor and viewer grant thousands of permissions: never grant them."""
    if not resource.is_iam:
        return Verdict.NOT_APPLICABLE
    return Verdict.NON_COMPLIANT if resource.role in BASIC_ROLES else Verdict.COMPLIANT


def no_public_principals(resource: Resource, _stack: Stack) -> Verdict:
    """allUsers / allAuthenticatedUsers make a resource public (to anyone with a Google account)."""
    if not resource.is_iam:
        return Verdict.NOT_APPLICABLE
    return Verdict.NON_COMPLIANT if PUBLIC_MEMBERS & set(resource.members) else Verdict.COMPLIANT


def _is_storage_trigger_grant(grant: Resource, stack: Stack) -> bool:
    """Publisher at project level for the Cloud Storage service agent, in a stack with a Cloud
    Storage Eventarc trigger: the agent publishes to the trigger's transport topic, which
    Eventarc creates and names itself, so no narrower grant exists."""
    storage_triggers = [
        config
        for config in stack.configs("google_cloudfunctions2_function").values()
        for event_type in values_at(config, ("event_trigger", "event_type"))
        if event_type == STORAGE_FINALIZED
    ]
    return (
        bool(storage_triggers)
        and grant.role == "roles/pubsub.publisher"
        and all(STORAGE_AGENT.match(member) for member in grant.members)
    )


def _is_event_receiver_grant(grant: Resource, stack: Stack) -> bool:
    """roles/eventarc.eventReceiver (project level only) for the accounts of Eventarc triggers
    that need it: every trigger but a Pub/Sub one, for which Eventarc says it is not needed."""
    accounts = grant.member_accounts
    receivers = trigger_accounts(stack, exclude_event_type=PUBSUB_PUBLISHED)
    return (
        grant.type == "google_project_iam_member"
        and grant.role == EVENT_RECEIVER_ROLE
        and bool(accounts)
        and len(accounts) == len(grant.members)
        and accounts <= receivers
    )


def role_scoped_to_one_resource(resource: Resource, stack: Stack) -> Verdict:
    """A role is granted on one resource, or at project level with a condition naming one
    database or one bucket (with its objects)."""
    if not resource.is_iam:
        return Verdict.NOT_APPLICABLE
    if not BROAD_IAM_TYPES.match(resource.type) or resource.role in PROJECT_ONLY_ROLES:
        return Verdict.COMPLIANT
    if resource.role in SCHEDULER_PROJECT_ONLY_ROLES and all(map(is_operator, resource.members)):
        return Verdict.COMPLIANT
    if is_catch_up_runner(resource, stack) or is_pauser(resource, stack) or is_resumer(resource, stack):
        return Verdict.COMPLIANT
    if is_target_grant(resource, stack):  # the narrowest level the target's API offers (RO-IAM-8)
        return Verdict.COMPLIANT
    if _is_storage_trigger_grant(resource, stack) or is_service_agent_grant(resource, stack):
        return Verdict.COMPLIANT
    if is_trigger_invoker_grant(resource, stack):  # before its function exists (RO-IAM-7, RO-DEP-2)
        return Verdict.COMPLIANT
    if _is_event_receiver_grant(resource, stack):
        return Verdict.COMPLIANT
    expression = resource.config.get("condition", {}).get("expression", "").strip()
    scoped = (
        ONE_DATABASE_CONDITION.match(expression)
        or ONE_BUCKET_CONDITION.match(expression)
        or ONE_INSTANCE_CONDITION.match(expression)
    )
    return Verdict.COMPLIANT if scoped else Verdict.NON_COMPLIANT


def identity_uses(stack: Stack, account: str) -> set[tuple[str, str]]:
    """(component kind, resource address) of every component that runs or calls as the
    `google_service_account` named `account` ("runtime", "build", "invoker", or the resource
    type for a use this module does not classify)."""
    reference = f"${{google_service_account.{account}."
    uses: set[tuple[str, str]] = set()
    for resource in stack.resources():
        paths = IDENTITY_PATHS.get(resource.type)
        if paths is not None:
            found = [
                role
                for path, role in paths.items()
                for value in values_at(resource.config, path)
                if isinstance(value, str) and reference in value
            ]
        else:
            found = [
                resource.type
                for key, value in walk(resource.config)
                if key in IDENTITY_ARGUMENTS and isinstance(value, str) and reference in value
            ]
        uses.update((role, resource.address) for role in found)
    return uses


def service_account_used_by_one_component(resource: Resource, stack: Stack) -> Verdict:
    """Every service account serves one kind of component: a runtime account exactly one function
    (the account that holds data access is never shared), a build account only builds, an invoker
    account only signs Scheduler jobs' tokens (the team's shared build and invoker accounts serve
    many). An account nobody uses is flagged, except one kept for a migration's single apply."""
    if resource.type != "google_service_account":
        return Verdict.NOT_APPLICABLE
    uses = identity_uses(stack, resource.name)
    kinds = {kind for kind, _ in uses}
    if not uses:
        retiring = resource.config.get("description") == RETIRING_ACCOUNT
        return Verdict.COMPLIANT if retiring else Verdict.NON_COMPLIANT
    if len(kinds) != 1:
        return Verdict.NON_COMPLIANT
    return Verdict.COMPLIANT if kinds != {"runtime"} or len(uses) == 1 else Verdict.NON_COMPLIANT


def no_service_account_keys(resource: Resource, _stack: Stack) -> Verdict:
    """Exported keys are long-lived secrets; components use their attached identity instead."""
    return Verdict.NON_COMPLIANT if resource.type == "google_service_account_key" else Verdict.NOT_APPLICABLE


def _invoker_accounts(stack: Stack) -> set[str]:
    """The names of the `google_service_account`s that this stack's Scheduler jobs and push
    subscriptions sign their tokens as."""
    return {
        account.group(1)
        for kind in INVOKER_SIGNERS
        for config in stack.configs(kind).values()
        for path in IDENTITY_PATHS[kind]
        for value in values_at(config, path)
        if (account := MEMBER_ACCOUNT.search(str(value)))
    }


def invoker_only_on_own_services(resource: Resource, stack: Stack) -> Verdict:
    """The invoker role is granted on one of this stack's own services (a function's, a deployed
    service's, or an existing service of the team's project read by its data source), never at
    project level (nor on a service named by a literal, another team's); and an account that Scheduler jobs or
    push subscriptions sign as holds nothing but that role."""
    if not resource.is_iam:
        return Verdict.NOT_APPLICABLE
    invoker_role = resource.role in INVOKER_ROLES
    invokers = resource.member_accounts & _invoker_accounts(stack)
    if not invoker_role and not invokers:
        return Verdict.NOT_APPLICABLE
    if is_trigger_invoker_grant(resource, stack) and not invokers:
        return Verdict.COMPLIANT
    if not invoker_role or resource.type not in SERVICE_IAM_TARGETS:
        return Verdict.NON_COMPLIANT
    target = str(resource.config.get(SERVICE_IAM_TARGETS[resource.type], ""))
    return Verdict.COMPLIANT if OWN_SERVICE.match(target) else Verdict.NON_COMPLIANT


def proxy_account_holds_only_its_target(resource: Resource, stack: Stack) -> Verdict:
    """A proxy's runtime account holds the ledger grant and the role of its one target on the
    narrowest resource the target's API offers, nothing else; and every proxy has that grant."""
    targets = proxy_targets(stack)
    if resource.type == "google_cloudfunctions2_function":
        if first_at(resource.config, TARGET_PATH, None) is None:
            return Verdict.NOT_APPLICABLE
        account = account_named(first_at(resource.config, ("service_config", "service_account_email")))
        if not account:
            return Verdict.NON_COMPLIANT
        own = [grant for grant in stack.grants() if account in grant.member_accounts]
        granted = all(
            any(needed(grant, target, stack) for grant in own)
            for target in targets[account]
            for needed in target_grants_needed(target)
        )
        return Verdict.COMPLIANT if granted else Verdict.NON_COMPLIANT
    if not resource.is_iam:
        return Verdict.NOT_APPLICABLE
    if not resource.member_accounts & set(targets):
        return Verdict.NOT_APPLICABLE
    ledger = resource.role == LEDGER_ROLE and ONE_DATABASE_CONDITION.match(
        resource.config.get("condition", {}).get("expression", "").strip()
    )
    if ledger:
        return Verdict.COMPLIANT
    return Verdict.COMPLIANT if is_target_grant(resource, stack) else Verdict.NON_COMPLIANT
