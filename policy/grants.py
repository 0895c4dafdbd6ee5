"""The grants the stacks make at project level on purpose, recognized by their exact shape.

Several rules (and the checkov runner) accept a project-level grant only where nothing narrower
exists, and only for its one principal: a proxy's target role, the Eventarc and Pub/Sub service
agents' own roles, an Eventarc trigger account's
invoker role. Each is recognized here, once.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from typing import Any

from policy.synthesized import Resource, Stack, account_named, first_at, values_at
from stacks.contract import TARGET_VARIABLE

ONE_DATABASE_CONDITION = re.compile(r'^resource\.name\s*==\s*"projects/[^/"]+/databases/[^/"]+"$')
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
EVENTARC_API = "eventarc.googleapis.com"
EVENTARC_AGENT_ROLE = "roles/eventarc.serviceAgent"
AGENT_ROLES = {EVENTARC_API: EVENTARC_AGENT_ROLE, "pubsub.googleapis.com": "roles/pubsub.serviceAgent"}
"""Each service agent's own role, as Google grants it on the project when it creates the agent."""
SERVICE_IDENTITY_MEMBER = re.compile(r"^\$\{google_project_service_identity\.([^.}]+)\.member\}$")
FUNCTION = "google_cloudfunctions2_function"
TRIGGER_ACCOUNT = ("event_trigger", "service_account_email")
TRIGGER_EVENT = ("event_trigger", "event_type")
RUNTIME_ACCOUNT = ("service_config", "service_account_email")


def is_eventarc_agent_grant(grant: Resource, stack: Stack) -> bool:
    """roles/eventarc.serviceAgent at project level for the Eventarc service agent
    (`is_service_agent_grant` of Eventarc)."""
    return is_service_agent_grant(grant, stack, EVENTARC_API)


def is_service_agent_grant(grant: Resource, stack: Stack, api: str = "") -> bool:
    """A service agent's own role (`AGENT_ROLES`) at project level (the only level it has) for
    that agent alone, as this stack's `google_project_service_identity` of its API names it (of
    `api` only, when given). The checkov runner accepts CKV_GCP_49 on these grants too."""
    identities = stack.configs("google_project_service_identity")
    members = grant.members
    return (
        grant.type == "google_project_iam_member"
        and "condition" not in grant.config
        and bool(members)
        and all(
            (named := SERVICE_IDENTITY_MEMBER.match(member)) is not None
            and (service := identities.get(named.group(1), {}).get("service")) in AGENT_ROLES
            and AGENT_ROLES[service] == grant.role
            and (not api or service == api)
            for member in members
        )
    )


def trigger_accounts(stack: Stack, exclude_event_type: str = "") -> set[str]:
    """The stack's service accounts that functions' Eventarc triggers deliver as (of triggers of
    any event type but `exclude_event_type`)."""
    return {
        account
        for config in stack.configs(FUNCTION).values()
        if not exclude_event_type or exclude_event_type not in values_at(config, TRIGGER_EVENT)
        for email in values_at(config, TRIGGER_ACCOUNT)
        if (account := account_named(email))
    }


def is_trigger_invoker_grant(grant: Resource, stack: Stack) -> bool:
    """roles/run.invoker at project level, unconditioned, for Eventarc trigger accounts only: it
    must exist before the function whose trigger delivers as that account, when the function's
    service does not exist yet, and Cloud Run does not evaluate resource names in conditions."""
    accounts = grant.member_accounts
    return (
        grant.type == "google_project_iam_member"
        and grant.role == "roles/run.invoker"
        and "condition" not in grant.config
        and bool(accounts)
        and len(accounts) == len(grant.members)
        and accounts <= trigger_accounts(stack)
    )


# A proxy (functions/proxy, deployed for a job's Google API target) reads its target from this
# variable; its runtime account may start that target and use the ledger, nothing else. The role
# and where it is granted, per target kind (stacks/target_access.py, docs/targets.md).
TARGET_PATH = ("service_config", "environment_variables", TARGET_VARIABLE)
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
ACT_AS_ROLE = "roles/iam.serviceAccountUser"
# What the pack accepts on the ledger and the operators' resources (RO-IAM-7, RO-OPS-*, RO-WDG-*):
# named here, by the pack, not taken from the stacks that grant them.
LEDGER_ROLE = "roles/datastore.user"
LEDGER_READER_ROLE = "roles/datastore.viewer"
JOB_RUNNER_ROLE = "roles/cloudscheduler.jobRunner"
SCHEDULER_VIEWER_ROLE = "roles/cloudscheduler.viewer"
PUBLISHER_ROLE = "roles/pubsub.publisher"
SUBSCRIBER_ROLE = "roles/pubsub.subscriber"
TRIGGER_ACCOUNT_EMAIL = re.compile(r"^[^@/]+@(?P<project>[^.@/]+)\.iam\.gserviceaccount\.com$")

Target = Mapping[str, Any]
GrantCheck = Callable[[Resource, Target, Stack], bool]


def proxy_targets(stack: Stack) -> dict[str, list[Target]]:
    """The targets of the stack's proxies, by the name of the runtime account each runs as (an
    unreadable target is kept as {} so that its proxy is flagged)."""
    found: dict[str, list[Target]] = {}
    for config in stack.configs(FUNCTION).values():
        raw = first_at(config, TARGET_PATH, None)
        account = account_named(first_at(config, RUNTIME_ACCOUNT))
        if raw is None or not account:
            continue
        try:
            target = json.loads(raw)
        except ValueError:
            target = {}
        found.setdefault(account, []).append(target if isinstance(target, Mapping) else {})
    return found


def grants_target(grant: Resource, target: Target, stack: Stack) -> bool:
    """Whether this grant is the one that lets a proxy start `target`, on the narrowest resource."""
    config, kind = grant.config, target.get("kind")
    if kind == "googleapis":
        project = stack.provider_project
        return (
            grant.type == "google_project_iam_member"
            and grant.role == target.get("role")
            and config.get("project", project) == project
            and "condition" not in config
        )
    name = str(target.get(TARGET_FIELDS.get(str(kind), ""), ""))
    parts = TARGET_NAME.match(name)
    if kind not in TARGET_ROLES or parts is None or grant.role != TARGET_ROLES[kind]:
        return False
    if kind == "cloud_run_job":
        return grant.type == "google_cloud_run_v2_job_iam_member" and (
            config.get("project"),
            config.get("location"),
            config.get("name"),
        ) == (parts["project"], parts["location"], parts["name"])
    return grant.type == "google_project_iam_member" and config.get("project") == parts["project"]


def acts_as_trigger_account(grant: Resource, target: Target, _stack: Stack) -> bool:
    """Whether this grant is actAs on the one account a build trigger target runs as
    (`service_account`), which running that trigger needs (docs/targets.md)."""
    email = str(target.get("service_account") or "")
    named = TRIGGER_ACCOUNT_EMAIL.match(email)
    return (
        target.get("kind") == "build_trigger"
        and named is not None
        and grant.type == "google_service_account_iam_member"
        and grant.role == ACT_AS_ROLE
        and grant.config.get("service_account_id") == f"projects/{named['project']}/serviceAccounts/{email}"
        and "condition" not in grant.config
    )


def target_grants_needed(target: Target) -> list[GrantCheck]:
    """Each grant a proxy needs to start `target`: its role, and actAs on a trigger's account."""
    needed: list[GrantCheck] = [grants_target]
    if target.get("kind") == "build_trigger" and target.get("service_account"):
        needed.append(acts_as_trigger_account)
    return needed


def is_target_grant(grant: Resource, stack: Stack, kind: str = "") -> bool:
    """Whether this grant lets a proxy's account start its target (of `kind`, if given)."""
    targets = proxy_targets(stack)
    return any(
        needed(grant, target, stack)
        for account in grant.member_accounts
        for target in targets.get(account, [])
        if not kind or target.get("kind") == kind
        for needed in target_grants_needed(target)
    )


def is_build_trigger_grant(grant: Resource, stack: Stack) -> bool:
    """The one grant that lets a proxy run its Cloud Build trigger: roles/cloudbuild.builds.editor
    on the trigger's project, to the account of the proxy whose RUNONCE_TARGET names that trigger
    (`stacks.target_access`). The checkov runner accepts CKV_GCP_49 on this grant only."""
    return grant.type == "google_project_iam_member" and is_target_grant(grant, stack, "build_trigger")
