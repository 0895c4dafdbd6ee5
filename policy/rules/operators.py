"""The operators' rules (`Team.operators`): a person or group holds exactly what the `runonce` verbs
need on the team's resources, and all of it.

An operator is a principal written as a literal (`group:...`, `user:...`, `domain:...`, or a
`serviceAccount:` email that is no reference to the stack's accounts or Google's agents): every
principal the stacks derive is a `${...}` reference.

`runonce resume` calls Scheduler's `jobs.resume`, which needs `cloudscheduler.jobs.enable` (the
REST reference), held by no predefined role but roles/cloudscheduler.admin: a team whose watchdog
may pause a job (`pause_after_failures`) gives its operators a project custom role with exactly
`cloudscheduler.jobs.get` and `cloudscheduler.jobs.enable`, and no other team grants one. There,
when the watchdog keeps its records in Firestore, each operator also reads the watchdog's own
database (`roles/datastore.viewer` conditioned on it alone): `runonce runs` and `show` print the
watchdog's record of a pause. Nothing else may read it, and no operator may write it.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from policy import grants
from policy.rules.store import is_connection_grant
from policy.rules.watchdog import DATABASE_VARIABLE, ONE_DATABASE, custom_permissions, watchdogs
from policy.synthesized import Resource, Stack, values_at
from policy.verdict import Verdict

TOPIC_REFERENCE = re.compile(r"^\$\{google_pubsub_topic\.([^.}]+)\.(id|name)\}$")
SUBSCRIPTION_REFERENCE = re.compile(r"^\$\{google_pubsub_subscription\.([^.}]+)\.(id|name)\}$")
RESUMER_PERMISSIONS = frozenset({"cloudscheduler.jobs.get", "cloudscheduler.jobs.enable"})
"""What `runonce resume` needs: read the job's state, and resume it (`jobs.resume`)."""
ENABLE = "cloudscheduler.jobs.enable"


# Google's service agents (`service-NUMBER@gcp-sa-SERVICE.iam.gserviceaccount.com` and the older
# `NUMBER@cloudservices`/`@cloudbuild` and Cloud Storage's `gs-project-accounts` forms): granted
# by the stacks for Google's own work, never operators.
SERVICE_AGENT = re.compile(
    r"^serviceAccount:(service-[^@]+@gcp-sa-[a-z0-9-]+\.iam|[0-9]+@(cloudservices|cloudbuild)"
    r"|service-[^@]+@gs-project-accounts\.iam)\.gserviceaccount\.com$"
)


def is_operator(member: str) -> bool:
    """A principal the team file wrote, not one the stack derives or a Google service agent."""
    return (
        "${" not in member
        and member not in ("allUsers", "allAuthenticatedUsers")
        and not (SERVICE_AGENT.match(member))
    )


def _topic_key(topic: str) -> str:
    """One spelling per topic: the stack's by resource name, another by its id's last segment."""
    found = TOPIC_REFERENCE.match(topic)
    return f"resource:{found.group(1)}" if found else f"topic:{topic.rsplit('/', 1)[-1]}"


def ledger_databases(stack: Stack) -> set[str]:
    """The databases the team's functions keep their runs in (not a watchdog's own)."""
    dogs = {dog.address for dog in watchdogs(stack)}
    found = {dog.ledger_database for dog in watchdogs(stack)}
    for name, config in stack.configs("google_cloudfunctions2_function").items():
        if f"google_cloudfunctions2_function.{name}" in dogs:
            continue
        for env in values_at(config, ("service_config", "environment_variables")):
            if isinstance(env, dict) and env.get(DATABASE_VARIABLE):
                found.add(str(env[DATABASE_VARIABLE]))
    return found


def pause_record_databases(stack: Stack) -> set[str]:
    """The own databases of the stack's watchdogs that may pause a job and keep their records in
    Firestore: where the operators read who paused a job, and why."""
    return {dog.own_database for dog in watchdogs(stack) if dog.pauses and not dog.on_valkey}


def source_topics(stack: Stack) -> set[str]:
    """The topics the event jobs receive from (`_topic_key`): push subscriptions' and triggers'."""
    topics = {
        _topic_key(str(config.get("topic", "")))
        for config in stack.configs("google_pubsub_subscription").values()
        if config.get("push_config")
    }
    for config in stack.configs("google_cloudfunctions2_function").values():
        topics.update(_topic_key(str(t)) for t in values_at(config, ("event_trigger", "pubsub_topic")) if t)
    return topics


def dead_letter_subscriptions(stack: Stack) -> set[str]:
    """The stack's pull subscriptions, by resource name: the event jobs' dead letters."""
    return {
        name
        for name, config in stack.configs("google_pubsub_subscription").items()
        if not config.get("push_config")
    }


def _what(grant: Resource, stack: Stack) -> str | None:
    """Which of the operator's grants this is ("ledger", "pause-records", "store", "runner",
    "viewer", "resumer", "subscriber:<name>", "publisher:<topic>"), or None if it is none of them."""
    if is_connection_grant(grant, stack):
        return "store"
    if grant.type == "google_project_iam_member":
        condition = grant.config.get("condition")
        if custom_permissions(grant, stack) == RESUMER_PERMISSIONS and not condition:
            return "resumer"
        if grant.role == grants.JOB_RUNNER_ROLE and not condition:
            return "runner"
        if grant.role == grants.SCHEDULER_VIEWER_ROLE and not condition:
            return "viewer"
        database = ONE_DATABASE.match(str((condition or {}).get("expression", "")).strip())
        if grant.role == grants.LEDGER_ROLE and database and database.group(1) in ledger_databases(stack):
            return "ledger"
        if (
            grant.role == grants.LEDGER_READER_ROLE
            and database
            and database.group(1) in pause_record_databases(stack)
        ):
            return "pause-records"
    if grant.type == "google_pubsub_subscription_iam_member" and grant.role == grants.SUBSCRIBER_ROLE:
        found = SUBSCRIPTION_REFERENCE.match(str(grant.config.get("subscription", "")))
        if found and found.group(1) in dead_letter_subscriptions(stack):
            return f"subscriber:{found.group(1)}"
    if grant.type == "google_pubsub_topic_iam_member" and grant.role == grants.PUBLISHER_ROLE:
        topic = _topic_key(str(grant.config.get("topic", "")))
        if topic in source_topics(stack):
            return f"publisher:{topic}"
    return None


def _operators_of(grant: Resource) -> list[str]:
    return [member for member in grant.members if is_operator(member)] if grant.is_iam else []


def operator_grants_are_the_verbs(resource: Resource, stack: Stack) -> Verdict:
    """An operator's grant is one of: datastore.user on the ledger's database, datastore.viewer on
    the own database of a watchdog that may pause a job (`pause_record_databases`), the connection role
    on the team's Valkey instance, the job runner, the Scheduler viewer and the resumer custom role
    on the project, subscriber on a dead-letter subscription, publisher on an event job's topic
    (RO-WDG-5 says where the resumer is needed)."""
    if not _operators_of(resource):
        return Verdict.NOT_APPLICABLE
    return Verdict.COMPLIANT if _what(resource, stack) is not None else Verdict.NON_COMPLIANT


def _needed(stack: Stack) -> Iterator[str]:
    if ledger_databases(stack):
        yield "ledger"
    if pause_record_databases(stack):
        yield "pause-records"
    if any(is_connection_grant(grant, stack) for grant in stack.grants()):
        yield "store"  # the runtimes connect with IAM: `runonce runs` does too
    if stack.configs("google_cloud_scheduler_job"):
        yield "runner"
        yield "viewer"
    yield from (f"subscriber:{name}" for name in dead_letter_subscriptions(stack))
    yield from (f"publisher:{topic}" for topic in source_topics(stack))


def operators_hold_every_verbs_grant(resource: Resource, stack: Stack) -> Verdict:
    """Each operator holds every kind, on every dead-letter subscription and every topic: a
    verb without its grant fails part-way (a replay that cannot acknowledge its copy)."""
    operators = _operators_of(resource)
    if not operators or _what(resource, stack) is None:
        return Verdict.NOT_APPLICABLE
    needed = set(_needed(stack))
    for operator in operators:
        held = {
            what
            for grant in stack.resources()
            if operator in _operators_of(grant) and (what := _what(grant, stack)) is not None
        }
        if not needed <= held:
            return Verdict.NON_COMPLIANT
    return Verdict.COMPLIANT


def pauses(stack: Stack) -> bool:
    """Whether a watchdog of the stack may pause a job (a watched job's `pause_after_failures`)."""
    return any(dog.pauses for dog in watchdogs(stack))


def _is_resumer_grant(grant: Resource, stack: Stack) -> bool:
    """A project-level grant, without a condition, of a custom role of the stack holding exactly
    `RESUMER_PERMISSIONS`."""
    return (
        grant.type == "google_project_iam_member"
        and not grant.config.get("condition")
        and custom_permissions(grant, stack) == RESUMER_PERMISSIONS
    )


def is_resumer(resource: Resource, stack: Stack) -> bool:
    """The resumer custom role on the project for operators only, in a stack whose watchdog may
    pause a job (Scheduler's IAM has no level below the project)."""
    members = resource.members
    return (
        bool(members)
        and all(map(is_operator, members))
        and _is_resumer_grant(resource, stack)
        and pauses(stack)
    )


def operators_can_resume(resource: Resource, stack: Stack) -> Verdict:
    """On a watchdog that may pause a job: every operator of the stack holds the resumer custom
    role (exactly `cloudscheduler.jobs.get` and `cloudscheduler.jobs.enable`) on the project, or
    `runonce resume` is refused and the job stays paused. On an operator's grant of a custom role
    holding `cloudscheduler.jobs.enable`: it is that role, in a stack whose watchdog may pause."""
    dog = next((dog for dog in watchdogs(stack) if dog.address == resource.address), None)
    if dog is not None:
        if not dog.pauses:
            return Verdict.NOT_APPLICABLE
        operators = {operator for grant in stack.grants() for operator in _operators_of(grant)}
        resumers = {
            operator
            for grant in stack.grants()
            if _is_resumer_grant(grant, stack)
            for operator in _operators_of(grant)
        }
        return Verdict.COMPLIANT if operators <= resumers else Verdict.NON_COMPLIANT
    held = custom_permissions(resource, stack) if _operators_of(resource) else None
    if held is None or ENABLE not in held:
        return Verdict.NOT_APPLICABLE
    return Verdict.COMPLIANT if is_resumer(resource, stack) else Verdict.NON_COMPLIANT
