"""The least-privilege pack: which rules run, how severe a violation is, and why each matters."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from policy import stack_set
from policy.rules import deploy, iam, monitoring, network, operators, pubsub, storage, store, watchdog
from policy.stack_set import Offenders
from policy.synthesized import Resource, Stack
from policy.verdict import Verdict


@dataclass(frozen=True)
class Rule:
    """A rule in a pack."""

    id: str
    """Stable id printed with findings, e.g. RO-IAM-1."""
    check: Callable[[Resource, Stack], Verdict]
    """The rule function (`policy.rules`): one resource and the stack around it in, a verdict out."""
    severity: str
    """"error" fails the policy run; "warning" is printed only."""
    explanation: str
    """Why it matters and what to do instead."""


@dataclass(frozen=True)
class StackSetRule:
    """A rule over all stacks together (see `policy.stack_set`)."""

    id: str
    """Stable id printed with findings, e.g. RO-SET-1."""
    check: Callable[[Mapping[str, Mapping[str, Any]]], Offenders]
    """The rule function: every (stack, resource) that breaks it."""
    severity: str
    """"error" fails the policy run; "warning" is printed only."""
    explanation: str
    """Why it matters and what to do instead."""


LEAST_PRIVILEGE = [
    Rule(
        "RO-DEP-1",
        deploy.depends_on_api_enablement,
        "error",
        "Add the google_project_service of every API the resource calls, and the time_sleep after "
        "it, to depends_on (policy/rules/deploy.py APIS_OF_TYPE lists the API of each resource type).",
    ),
    Rule(
        "RO-DEP-2",
        deploy.triggered_function_waits_for_agent_and_invoker,
        "error",
        "Make every function with an Eventarc trigger depend on a time_sleep of at least 120s after "
        "the Eventarc service agent's roles/eventarc.serviceAgent grant (google_project_service_"
        "identity of eventarc.googleapis.com) and its trigger account's roles/run.invoker grant: on "
        "a fresh project the trigger is refused, and its first events, until both are in effect.",
    ),
    Rule(
        "RO-IAM-1",
        iam.no_basic_roles,
        "error",
        "Basic roles (owner/editor/viewer) grant far more than any job needs; grant a predefined role.",
    ),
    Rule(
        "RO-IAM-2",
        iam.no_public_principals,
        "error",
        "allUsers/allAuthenticatedUsers make the resource public; grant to one service account.",
    ),
    Rule(
        "RO-IAM-3",
        iam.role_scoped_to_one_resource,
        "error",
        "Grant on the one resource (bucket, service, repository), or condition a project grant to "
        'one database with resource.name == "projects/P/databases/D".',
    ),
    Rule(
        "RO-IAM-4",
        iam.service_account_used_by_one_component,
        "error",
        "Give every function its own runtime account, and keep the team's build account for "
        "builds and its invoker account for Scheduler tokens only, so each holds only its own "
        "permissions (and an unused account is removed).",
    ),
    Rule(
        "RO-IAM-5",
        iam.no_service_account_keys,
        "error",
        "Service account keys are long-lived secrets; use the attached identity or OIDC tokens.",
    ),
    Rule(
        "RO-IAM-6",
        deploy.build_account_reads_gcf_sources,
        "error",
        "Grant the build account roles/storage.objectViewer on the gcf-v2-sources-NUMBER-REGION "
        "bucket (a project grant conditioned to it), and make the function depend on a time_sleep "
        "after that grant.",
    ),
    Rule(
        "RO-IAM-7",
        iam.invoker_only_on_own_services,
        "error",
        "Grant roles/run.invoker on each of the team's own services (google_cloud_run_v2_service_"
        "iam_member, name = the function's service_config.service, a deployed service's name, or an "
        "existing service's as its data source reads it), never on the project or a "
        "service named by a literal (an Eventarc trigger account's project grant excepted: it must "
        "exist before its function's service); the Scheduler invoker account holds that role and "
        "nothing else.",
    ),
    Rule(
        "RO-IAM-8",
        iam.proxy_account_holds_only_its_target,
        "error",
        "A proxy's runtime account holds the ledger grant and its target's role on the narrowest "
        "resource (the Cloud Run job itself; the workflow's or trigger's project; the team's project "
        "for a generic call's declared role) and, for a build trigger that runs as its own account, "
        "roles/iam.serviceAccountUser on that one account; nothing else; give every proxy them.",
    ),
    Rule(
        "RO-IAM-9",
        pubsub.pubsub_agent_forwards_dead_letters,
        "error",
        "Grant the Pub/Sub service agent roles/pubsub.publisher on the dead-letter topic, "
        "roles/pubsub.subscriber on the subscription that dead-letters into it, and "
        "roles/iam.serviceAccountTokenCreator on the account a push subscription or an Eventarc "
        "trigger signs as (google_service_account_iam_member on that account, which the "
        "subscription or the triggered function depends on), and nothing else: never token "
        "creator on the project.",
    ),
    Rule(
        "RO-IAM-10",
        pubsub.runtime_publishes_only_its_dead_letters,
        "error",
        "An event function's runtime account gets roles/pubsub.publisher on its own dead-letter "
        "topic only (the one of the subscription pushing to it), no other Pub/Sub grant.",
    ),
    Rule(
        "RO-IAM-11",
        deploy.caller_waits_for_its_invoker_grant,
        "error",
        "Make every Scheduler job and push subscription depend on its signer's run.invoker grant on "
        "the service it calls and on a time_sleep of at least 120s after that grant (IAM changes "
        "typically take 2 minutes to propagate); until then every call is refused.",
    ),
    Rule(
        "RO-MON-1",
        monitoring.private_channels,
        "error",
        'Create only e-mail notification channels (type = "email", labels.email_address): any other '
        "type sends alerts to a URL or a third-party workspace; create such a channel outside the "
        "stack, reviewed, and list it in the team's notification_channels.",
    ),
    Rule(
        "RO-MON-2",
        monitoring.no_per_run_labels,
        "error",
        "Label log-based metrics (and log-match conditions) by job and outcome only, never by run "
        "key, event or message id, attempt, time or trace: each value of a label is a time series.",
    ),
    Rule(
        "RO-MON-3",
        monitoring.alert_names_a_command,
        "error",
        'Give every alert policy documentation { mime_type = "text/markdown" } whose content names '
        "the `runonce ...` command to run (docs/monitoring.md).",
    ),
    Rule(
        "RO-MON-4",
        monitoring.log_match_is_rate_limited,
        "error",
        "Set alert_strategy.notification_rate_limit.period on every policy with a "
        "condition_matched_log, and give that policy no other condition.",
    ),
    Rule(
        "RO-MON-5",
        monitoring.no_absence_conditions,
        "error",
        "Do not use condition_absent: it lasts at most 23.5 hours and needs a data point after it "
        "is created; missed runs are reported by the watchdog.",
    ),
    Rule(
        "RO-MON-6",
        monitoring.policy_waits_for_its_metrics,
        "error",
        "Make every alert policy on a log-based metric depend on that google_logging_metric of the "
        "stack and on a time_sleep of at least 600s after it (provider issue 11102).",
    ),
    Rule(
        "RO-NET-1",
        network.ingress_not_open,
        "error",
        'Set ingress to "ALLOW_INTERNAL_ONLY": Scheduler in the same project still reaches it.',
    ),
    Rule(
        "RO-NET-2",
        network.scheduler_calls_run_app_uri,
        "error",
        "Call the function's run.app URI (service_config.uri), or a path of a service's uri, with an "
        "OIDC token whose audience is that run.app URL without the path: with internal-only ingress, "
        "Scheduler is internal only on the run.app URL, and Cloud Run accepts that URL as audience.",
    ),
    Rule(
        "RO-NET-3",
        network.push_calls_run_app_uri,
        "error",
        "Push to the function's run.app URI (service_config.uri) with push_config.oidc_token signed "
        "by the team's invoker and audience set to that URI.",
    ),
    Rule(
        "RO-OPS-1",
        operators.operator_grants_are_the_verbs,
        "error",
        "Grant an operator (Team.operators) only roles/datastore.user conditioned on the ledger's "
        "database (on Valkey, roles/memorystore.dbConnectionUser conditioned on its instance), "
        "roles/cloudscheduler.jobRunner and roles/cloudscheduler.viewer on the project (and, where a "
        "job can be paused, the resumer custom role of RO-WDG-5 and, when the watchdog keeps its "
        "records in Firestore, roles/datastore.viewer conditioned on the watchdog's own database: "
        "runonce runs and show read its pause records there), "
        "roles/pubsub.subscriber on a "
        "dead-letter subscription and roles/pubsub.publisher on an event job's topic: what the "
        "runonce verbs need (docs/watchdog.md, IAM for operators).",
    ),
    Rule(
        "RO-OPS-2",
        operators.operators_hold_every_verbs_grant,
        "error",
        "Give every operator all of those grants, on every dead-letter subscription and every "
        "event job's topic of the stack: a verb missing one fails part-way (without the read of "
        "the watchdog's database, runs and show cannot say who paused a job, or why).",
    ),
    Rule(
        "RO-PS-1",
        pubsub.push_dead_letters,
        "error",
        "Give every push subscription a dead_letter_policy (5-100 attempts) to a dead-letter topic "
        'of the stack, and expiration_policy { ttl = "" } so it never expires.',
    ),
    Rule(
        "RO-STO-1",
        storage.bucket_private,
        "error",
        'Set uniform_bucket_level_access = true and public_access_prevention = "enforced".',
    ),
    Rule(
        "RO-VAL-1",
        store.no_eviction,
        "error",
        'Set engine_configs = {"maxmemory-policy" = "noeviction"} on the Valkey instance: the default, '
        "volatile-lru, evicts keys with an expiry, and every run record has one (an evicted record is "
        "a run that runs again).",
    ),
    Rule(
        "RO-VAL-2",
        store.encrypted_in_transit,
        "error",
        'Set transit_encryption_mode = "SERVER_AUTHENTICATION" on the Valkey instance (only at '
        "creation) and give the runtimes its CA (RUNONCE_STORE_CA).",
    ),
    Rule(
        "RO-VAL-3",
        store.no_public_path,
        "error",
        "Reach the store only through its Private Service Connect endpoints: give the instance "
        "desired_auto_created_endpoints, and open no firewall rule to 0.0.0.0/0.",
    ),
    Rule(
        "RO-VAL-4",
        store.store_roles_on_instance_only,
        "error",
        "Grant no roles/memorystore.* (or roles/redis.*) on the project: it reaches every instance. "
        "Grant roles/memorystore.dbConnectionUser only, with the condition "
        'resource.name == "projects/P/locations/L/instances/ID" naming the team\'s instance.',
    ),
    Rule(
        "RO-VAL-5",
        store.iam_authentication,
        "error",
        'Set authorization_mode = "IAM_AUTH" on the Valkey instance (Valkey(iam_auth=True)), so a '
        "caller needs roles/memorystore.dbConnectionUser on it besides a path through the VPC; "
        "acknowledge with a reason to rely on the network alone.",
    ),
    Rule(
        "RO-WDG-1",
        watchdog.watchdog_holds_only_what_it_needs,
        "error",
        "Grant the watchdog's account roles/datastore.viewer conditioned on the ledger's database "
        "and roles/datastore.user conditioned on its own database only: it reports on the ledger "
        "and must not be able to change it (docs/watchdog.md). Only when a watched job has "
        "catch_up_seconds, add roles/datastore.user conditioned on the ledger's database and "
        "roles/cloudscheduler.jobRunner on the project (docs/stacks/schedules.md); only when one "
        "has pause_after_failures, a custom role with exactly cloudscheduler.jobs.get and "
        "cloudscheduler.jobs.pause on the project (docs/schedules/pause.md).",
    ),
    Rule(
        "RO-WDG-2",
        watchdog.watchdog_has_its_own_store_and_reads_the_ledger,
        "error",
        "Give the watchdog a RUNONCE_DATABASE other than the ledger it reads "
        "(RUNONCE_WATCHDOG_LEDGER_DATABASE) and its account roles/datastore.viewer on the ledger: "
        "Firestore's IAM is per database, so a watchdog writing the ledger's database could "
        "change the ledger.",
    ),
    Rule(
        "RO-WDG-3",
        watchdog.watchdog_can_catch_up,
        "error",
        "A watchdog with a catch-up window (a watched job's catch_up_seconds) needs its account "
        "to hold roles/datastore.user conditioned on the ledger's database and "
        "roles/cloudscheduler.jobRunner on the project: without them every catch-up fails "
        "(docs/stacks/schedules.md).",
    ),
    Rule(
        "RO-WDG-4",
        watchdog.watchdog_can_pause,
        "error",
        "A watchdog that pauses a job that keeps failing (a watched job's pause_after_failures) "
        "needs its account to hold a project custom role with exactly cloudscheduler.jobs.get and "
        "cloudscheduler.jobs.pause (no predefined role but roles/cloudscheduler.admin has "
        "jobs.pause): without it every pause is refused (docs/schedules/pause.md).",
    ),
    Rule(
        "RO-WDG-5",
        operators.operators_can_resume,
        "error",
        "Where a watched job has pause_after_failures, give every operator (Team.operators) a "
        "project custom role with exactly cloudscheduler.jobs.get and cloudscheduler.jobs.enable "
        "(runonce resume calls jobs.resume, which needs jobs.enable; no predefined role but "
        "roles/cloudscheduler.admin has it); grant no such role where no job can be paused "
        "(docs/watchdog.md, IAM for operators).",
    ),
]
"""The pack `make policy` and the tests run on every stack."""

ACROSS_STACKS = [
    StackSetRule(
        "RO-SET-1",
        stack_set.no_shared_resource_names,
        "error",
        "Two stacks derive the same resource name: rename one team or job (names are "
        "<team>-<job>), or deploy one of them to another project.",
    ),
    StackSetRule(
        "RO-SET-2",
        stack_set.no_shared_state,
        "error",
        "Two stacks keep their state in one place: give each team its own GcsState prefix.",
    ),
]
"""The rules `make policy` runs over all stacks together."""

RULE_IDS = tuple(rule.id for rules in (LEAST_PRIVILEGE, ACROSS_STACKS) for rule in rules)
"""Every rule id `make policy` reports, in pack order: the ids a team may acknowledge."""
