"""Google API targets in the team file: what a job starts through the idempotent proxy.

`Job(target=Workflow(...))` instead of `source=`: the stack deploys the proxy shipped with runonce
(`functions/proxy`, no team code) with `RUNONCE_TARGET` set to the target's JSON, runs it as a
runtime account that holds only the target's role on the narrowest resource the API supports,
and Scheduler calls it with OIDC like any other job (docs/targets.md, "The stacks").

The target classes are the proxy's own (`runonce.targets.schema`): one definition, whose JSON form
(`target_json`) the proxy parses at run time and `stacks.validate.targets` checks with the same
`problems` before anything is deployed. What only the stack reads is named here.
"""

from __future__ import annotations

import re

from runonce.contract import TARGET_BASE_URL_VARIABLE, TARGET_TIMEOUT_VARIABLE, TARGET_VARIABLE
from runonce.targets.schema import (
    CALLS_PER_ATTEMPT,
    GRACE_MARGIN_SECONDS,
    JOB_NAME,
    TARGET_CLASSES,
    TRIGGER_NAME,
    WORKFLOW_NAME,
    BuildTrigger,
    CloudRunJob,
    GoogleApi,
    Target,
    Workflow,
    target_json,
)
from runonce.targets.schema import DEFAULT_TIMEOUT_SECONDS as CALL_TIMEOUT_SECONDS

CALL_TIMEOUT_ENV = TARGET_TIMEOUT_VARIABLE
STACK_ENV = (TARGET_VARIABLE, TARGET_BASE_URL_VARIABLE)
"""Proxy variables a job may not set: the stack sets the target, and the base URL exists only to
point tests at a local stand-in (it would send the account's token elsewhere)."""
SERVICE_ACCOUNT_EMAIL = re.compile(
    r"^(?P<name>[a-z][a-z0-9-]{4,28}[a-z0-9])@(?P<project>[a-z][a-z0-9-]{4,28}[a-z0-9])\.iam\.gserviceaccount\.com$"
)
"""A user-managed service account's email; its project is in it (IAM, service account ids)."""

__all__ = [
    "CALLS_PER_ATTEMPT",
    "CALL_TIMEOUT_ENV",
    "CALL_TIMEOUT_SECONDS",
    "GRACE_MARGIN_SECONDS",
    "JOB_NAME",
    "SERVICE_ACCOUNT_EMAIL",
    "STACK_ENV",
    "TARGET_CLASSES",
    "TARGET_VARIABLE",
    "TRIGGER_NAME",
    "WORKFLOW_NAME",
    "BuildTrigger",
    "CloudRunJob",
    "GoogleApi",
    "Target",
    "Workflow",
    "target_json",
]
