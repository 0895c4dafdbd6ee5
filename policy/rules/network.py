"""Network rules: who may reach a function, and on which URL its callers reach it."""

from __future__ import annotations

import re
from collections.abc import Mapping

from policy.rules.pubsub import push_config
from policy.synthesized import Resource, Stack, block, walk
from policy.verdict import Verdict

SERVING_TYPES = {
    "google_cloudfunctions2_function",
    "google_cloudfunctions_function",
    "google_cloud_run_v2_service",
}
OPEN_INGRESS = {"ALLOW_ALL", "INGRESS_TRAFFIC_ALL"}
INGRESS_ARGUMENTS = {"ingress_settings", "ingress"}
# The run.app URI of a gen2 function's (or a Cloud Run service's, deployed or read by the data
# source) default URL, as a reference or a literal, then a path: with internal-only ingress,
# Scheduler is internal only on that URL.
RUN_APP_URI = re.compile(
    r"^(?P<base>\$\{google_cloudfunctions2_function\.[^.}]+\.service_config\[0\]\.uri\}"
    r"|\$\{(data\.)?google_cloud_run_v2_service\.[^.}]+\.uri\}"
    r"|https://[^/]+\.run\.app)(?P<path>/\S*)?$"
)


def ingress_not_open(resource: Resource, _stack: Stack) -> Verdict:
    """Functions and Cloud Run services accept internal traffic only (no setting means open)."""
    if resource.type not in SERVING_TYPES:
        return Verdict.NOT_APPLICABLE
    settings = {value for key, value in walk(resource.config) if key in INGRESS_ARGUMENTS}
    return Verdict.COMPLIANT if settings and not settings & OPEN_INGRESS else Verdict.NON_COMPLIANT


def scheduler_calls_run_app_uri(resource: Resource, _stack: Stack) -> Verdict:
    """An HTTP Scheduler job calls the run.app URI (a path of it, for a service job) with an OIDC
    token whose audience is the run.app URL without the path (an absent audience defaults to the
    whole URI): the cloudfunctions.net URL (`function.url`) is not internal traffic, so an
    internal-only function refuses it, and the audience Cloud Run's "custom audiences" page
    documents as accepted is the run.app URL itself (or a configured custom audience), not that URL
    with a path."""
    if resource.type != "google_cloud_scheduler_job" or "http_target" not in resource.config:
        return Verdict.NOT_APPLICABLE
    target = resource.config["http_target"]
    uri = target.get("uri", "")
    token = target.get("oidc_token")
    called = RUN_APP_URI.match(uri)
    if not called or not isinstance(token, Mapping):
        return Verdict.NON_COMPLIANT
    return Verdict.COMPLIANT if token.get("audience", uri) == called["base"] else Verdict.NON_COMPLIANT


def push_calls_run_app_uri(resource: Resource, _stack: Stack) -> Verdict:
    """A push subscription calls the run.app URI with an OIDC token whose audience is set to that
    URI: with internal-only ingress, Pub/Sub is internal only on the run.app URL, and an unset
    audience would default to the endpoint (with its path) rather than to the service."""
    push = push_config(resource)
    if push is None:
        return Verdict.NOT_APPLICABLE
    uri = str(push.get("push_endpoint", ""))
    token = block(push, "oidc_token")
    if not RUN_APP_URI.match(uri) or not token.get("service_account_email"):
        return Verdict.NON_COMPLIANT
    return Verdict.COMPLIANT if token.get("audience") == uri else Verdict.NON_COMPLIANT
