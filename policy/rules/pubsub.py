"""Pub/Sub rules: push subscriptions dead-letter and never expire, the service agent holds exactly
what dead-lettering and push tokens need, and a runtime account publishes only its dead letters."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from policy.grants import SERVICE_IDENTITY_MEMBER, is_service_agent_grant
from policy.synthesized import Resource, Stack, account_named, block, first_at, values_at
from policy.verdict import Verdict
from stacks.contract import DEAD_LETTER_TOPIC_VARIABLE

MIN_DELIVERY_ATTEMPTS, MAX_DELIVERY_ATTEMPTS = 5, 100
PUBSUB_API = "pubsub.googleapis.com"
PUBSUB_AGENT = re.compile(r"^serviceAccount:service-[^@]+@gcp-sa-pubsub\.iam\.gserviceaccount\.com$")
TOPIC_REFERENCE = re.compile(r"^\$\{google_pubsub_topic\.([^.}]+)\.(id|name)\}$")
SUBSCRIPTION_REFERENCE = re.compile(r"^\$\{google_pubsub_subscription\.([^.}]+)\.(id|name)\}$")
PUBSUB_GRANT_TYPES = {"google_pubsub_topic_iam_member", "google_pubsub_subscription_iam_member"}
TOKEN_CREATOR = "roles/iam.serviceAccountTokenCreator"
ACCOUNT_NAME = re.compile(r"^\$\{google_service_account\.([^.}]+)\.name\}$")
RUNTIME_ACCOUNT = ("service_config", "service_account_email")


def is_pubsub_agent(member: str, stack: Stack) -> bool:
    """Whether an IAM member is the Pub/Sub service agent: its email, or the `member` of this
    stack's `google_project_service_identity` of Pub/Sub (how the stacks name it)."""
    named = SERVICE_IDENTITY_MEMBER.match(member)
    if named is not None:
        return (
            stack.configs("google_project_service_identity").get(named.group(1), {}).get("service")
            == PUBSUB_API
        )
    return PUBSUB_AGENT.match(member) is not None


def push_config(resource: Resource) -> Mapping[str, Any] | None:
    """The push_config of a push subscription (None for anything else, a pull subscription too)."""
    if resource.type != "google_pubsub_subscription":
        return None
    push = block(resource.config, "push_config")
    return push if push.get("push_endpoint") else None


def push_dead_letters(resource: Resource, _stack: Stack) -> Verdict:
    """A push subscription has a dead_letter_policy (5-100 attempts) to a topic of this stack,
    and never expires (`expiration_policy { ttl = "" }`): without the policy a message that
    keeps failing is redelivered until its retention ends and then lost; an expired
    subscription loses every message published after it."""
    if push_config(resource) is None:
        return Verdict.NOT_APPLICABLE
    policy = block(resource.config, "dead_letter_policy")
    attempts = policy.get("max_delivery_attempts")
    own_topic = str(policy.get("dead_letter_topic", "")).startswith("${google_pubsub_topic.")
    in_range = isinstance(attempts, int) and MIN_DELIVERY_ATTEMPTS <= attempts <= MAX_DELIVERY_ATTEMPTS
    never_expires = block(resource.config, "expiration_policy").get("ttl") == ""
    return Verdict.COMPLIANT if own_topic and in_range and never_expires else Verdict.NON_COMPLIANT


def _dead_letter_topics(stack: Stack) -> dict[str, str]:
    """The stack's dead-letter topics (by resource name), each with the push subscription using it."""
    found: dict[str, str] = {}
    for name, config in stack.configs("google_pubsub_subscription").items():
        topic = TOPIC_REFERENCE.match(str(block(config, "dead_letter_policy").get("dead_letter_topic", "")))
        if topic:
            found[topic.group(1)] = name
    return found


def _granted_on(grant: Resource) -> str:
    """The resource name of the topic or subscription a Pub/Sub grant is on ("" for a literal)."""
    pattern, field = (
        (TOPIC_REFERENCE, "topic")
        if grant.type == "google_pubsub_topic_iam_member"
        else (SUBSCRIPTION_REFERENCE, "subscription")
    )
    found = pattern.match(str(grant.config.get(field, "")))
    return found.group(1) if found else ""


def _agent_grant_is_needed(grant: Resource, stack: Stack) -> bool:
    """Publisher on a dead-letter topic, or subscriber on a subscription that dead-letters."""
    role, on = grant.role, _granted_on(grant)
    if grant.type == "google_pubsub_topic_iam_member":
        return role == "roles/pubsub.publisher" and on in _dead_letter_topics(stack)
    return role == "roles/pubsub.subscriber" and on in _dead_letter_topics(stack).values()


def _push_signer(config: Mapping[str, Any]) -> str:
    """The name of the `google_service_account` a push subscription signs its OIDC tokens as
    ("" for a pull subscription, a push without a token, or an account named by a literal)."""
    push = block(config, "push_config")
    email = block(push, "oidc_token").get("service_account_email", "") if push.get("push_endpoint") else ""
    return account_named(email)


def _trigger_signer(config: Mapping[str, Any]) -> str:
    """The name of the `google_service_account` a gen2 function's Eventarc trigger signs its
    pushes' tokens as ("" without an `event_trigger`, or for an account named by a literal)."""
    return account_named(block(config, "event_trigger").get("service_account_email", ""))


def _signers(stack: Stack) -> set[str]:
    """Every `google_service_account` of the stack that push subscriptions or Eventarc triggers
    sign their OIDC tokens as."""
    pushes = {_push_signer(config) for config in stack.configs("google_pubsub_subscription").values()}
    triggers = {
        _trigger_signer(config) for config in stack.configs("google_cloudfunctions2_function").values()
    }
    return (pushes | triggers) - {""}


def _agent_token_grants(stack: Stack, account: str) -> set[str]:
    """The grants of token creator to the Pub/Sub service agent on the `google_service_account`
    named `account` itself (addresses)."""
    return {
        grant.address
        for grant in stack.of_type("google_service_account_iam_member")
        if grant.role == TOKEN_CREATOR
        and (found := ACCOUNT_NAME.match(str(grant.config.get("service_account_id", "")))) is not None
        and found.group(1) == account
        and all(is_pubsub_agent(member, stack) for member in grant.members)
    }


def _dead_lettering_granted(subscription: Resource, stack: Stack) -> bool:
    """Publisher on the subscription's dead-letter topic and subscriber on the subscription, both
    for the service agent."""
    topic = TOPIC_REFERENCE.match(
        str(block(subscription.config, "dead_letter_policy").get("dead_letter_topic", ""))
    )
    agent = [
        grant
        for grant in stack.of_type(*PUBSUB_GRANT_TYPES)
        if any(is_pubsub_agent(member, stack) for member in grant.members)
    ]
    publishes = any(
        grant.type == "google_pubsub_topic_iam_member"
        and grant.role == "roles/pubsub.publisher"
        and topic is not None
        and _granted_on(grant) == topic.group(1)
        for grant in agent
    )
    subscribes = any(
        grant.type == "google_pubsub_subscription_iam_member"
        and grant.role == "roles/pubsub.subscriber"
        and _granted_on(grant) == subscription.name
        for grant in agent
    )
    return publishes and subscribes


def pubsub_agent_forwards_dead_letters(resource: Resource, stack: Stack) -> Verdict:
    """The Pub/Sub service agent holds publisher on each dead-letter topic and subscriber on each
    subscription that dead-letters into it (dead-lettering needs both); token creator on each
    account a push subscription or an Eventarc trigger signs its OIDC tokens as, on that account
    (a project created on or before April 8, 2021 needs it to sign), and the subscription or the
    triggered function depends on that grant; and nothing else but its own role
    (roles/pubsub.serviceAgent, which an agent created on request lacks), no project-level token
    creator either."""
    if resource.type == "google_cloudfunctions2_function":
        signer = _trigger_signer(resource.config)
        if not signer:
            return Verdict.NOT_APPLICABLE
        waits = _agent_token_grants(stack, signer) & stack.depends_on_closure(resource)
        return Verdict.COMPLIANT if waits else Verdict.NON_COMPLIANT
    if resource.type == "google_pubsub_subscription":
        dead_letters = bool(block(resource.config, "dead_letter_policy"))
        signer = _push_signer(resource.config)
        if not dead_letters and not signer:
            return Verdict.NOT_APPLICABLE
        if dead_letters and not _dead_lettering_granted(resource, stack):
            return Verdict.NON_COMPLIANT
        if signer and not _agent_token_grants(stack, signer) & stack.depends_on_closure(resource):
            return Verdict.NON_COMPLIANT
        return Verdict.COMPLIANT
    if not resource.is_iam or not any(is_pubsub_agent(member, stack) for member in resource.members):
        return Verdict.NOT_APPLICABLE
    if is_service_agent_grant(resource, stack, PUBSUB_API):  # its own role, as Google grants it
        return Verdict.COMPLIANT
    if resource.type == "google_service_account_iam_member":
        needed = any(resource.address in _agent_token_grants(stack, signer) for signer in _signers(stack))
    else:
        needed = resource.type in PUBSUB_GRANT_TYPES and _agent_grant_is_needed(resource, stack)
    return Verdict.COMPLIANT if needed else Verdict.NON_COMPLIANT


def _runtime_accounts(stack: Stack) -> set[str]:
    """The runtime accounts (resource names) of the stack's gen2 functions."""
    return {
        account
        for config in stack.configs("google_cloudfunctions2_function").values()
        if (account := account_named(first_at(config, RUNTIME_ACCOUNT)))
    }


def _runs_as(config: Mapping[str, Any], account: str) -> bool:
    """Whether a function's runtime account is the `google_service_account` named `account`."""
    return any(account_named(value) == account for value in values_at(config, RUNTIME_ACCOUNT))


def _dead_letter_paths(stack: Stack, account: str) -> set[str]:
    """The dead-letter topics (RUNONCE_DEAD_LETTER_TOPIC) of the functions running as `account`."""
    return {
        str(path)
        for config in stack.configs("google_cloudfunctions2_function").values()
        if _runs_as(config, account)
        for path in values_at(config, ("service_config", "environment_variables", DEAD_LETTER_TOPIC_VARIABLE))
    }


def runtime_publishes_only_its_dead_letters(resource: Resource, stack: Stack) -> Verdict:
    """An event function's runtime account holds publisher on its own dead-letter topic (the one
    its RUNONCE_DEAD_LETTER_TOPIC names), and no other Pub/Sub grant: it must not publish into
    another job's dead letters or the source topic, nor read or consume any subscription."""
    if resource.type not in PUBSUB_GRANT_TYPES:
        return Verdict.NOT_APPLICABLE
    accounts = resource.member_accounts & _runtime_accounts(stack)
    if not accounts:
        return Verdict.NOT_APPLICABLE
    if resource.type != "google_pubsub_topic_iam_member" or resource.role != "roles/pubsub.publisher":
        return Verdict.NON_COMPLIANT
    topic = stack.config_at(f"google_pubsub_topic.{_granted_on(resource)}")
    project = topic.get("project") or stack.provider_project
    path = f"projects/{project}/topics/{topic.get('name', '')}"
    own = all(_dead_letter_paths(stack, account) == {path} for account in accounts)
    return Verdict.COMPLIANT if topic and own else Verdict.NON_COMPLIANT
