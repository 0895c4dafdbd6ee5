"""Google API targets in the team file: what a job starts through the idempotent proxy.

`Job(target=Workflow(...))` instead of `source=`: the stack deploys the proxy shipped with runonce
(`functions/proxy`, no team code) with `RUNONCE_TARGET` set to the target's JSON, runs it as a
runtime account that holds only the target's role on the narrowest resource the API supports,
and Scheduler calls it with OIDC like any other job (docs/targets.md, "The stacks").

These shapes mirror `runonce.targets` (functions/runonce/targets.py), which the proxy parses at
run time: the same fields, the same JSON (`as_json`). They are plain data here because
`stacks.team` must stay importable without cdktf and without the runonce package; a test parses
every JSON form with `runonce.targets.parse_target` so the two cannot drift apart.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field, fields
from typing import Any, ClassVar

WORKFLOW_NAME = re.compile(
    r"^projects/(?P<project>[^/]+)/locations/(?P<location>[^/]+)/workflows/(?P<name>[^/]+)$"
)
JOB_NAME = re.compile(r"^projects/(?P<project>[^/]+)/locations/(?P<location>[^/]+)/jobs/(?P<name>[^/]+)$")
TRIGGER_NAME = re.compile(
    r"^projects/(?P<project>[^/]+)/locations/(?P<location>[^/]+)/triggers/(?P<name>[^/]+)$"
)
TARGET_VARIABLE = "RUNONCE_TARGET"
"""The proxy reads its target from this variable (runonce.targets.TARGET_VARIABLE)."""
STACK_ENV = (TARGET_VARIABLE, "RUNONCE_TARGET_BASE_URL")
"""Proxy variables a job may not set: the stack sets the target, and the base URL exists only to
point tests at a local stand-in (it would send the account's token elsewhere)."""
STACK_FIELDS = ("service_account",)
"""Target fields only the stack reads (to grant what starting the target needs); they stay in the
JSON, so that two jobs that differ in them get proxies of their own, and the proxy ignores them."""
CALL_TIMEOUT_ENV = "RUNONCE_TARGET_TIMEOUT_SECONDS"
CALL_TIMEOUT_SECONDS = 30
"""The proxy's timeout per call unless CALL_TIMEOUT_ENV says otherwise (runonce.targets.proxy)."""
GRACE_MARGIN_SECONDS = 60
"""The proxy holds a start of unknown outcome for RUNONCE_TARGET_GRACE_SECONDS, by default the
call timeout plus this margin (runonce.targets.proxy.GRACE_MARGIN_SECONDS)."""
CALLS_PER_ATTEMPT = 3
"""At most: look for an earlier start, start, and look once more after a lost answer."""
SERVICE_ACCOUNT_EMAIL = re.compile(
    r"^(?P<name>[a-z][a-z0-9-]{4,28}[a-z0-9])@(?P<project>[a-z][a-z0-9-]{4,28}[a-z0-9])\.iam\.gserviceaccount\.com$"
)
"""A user-managed service account's email; its project is in it (IAM, service account ids)."""


@dataclass(frozen=True)
class _TargetForm:
    """What every target shares: its `kind`, and its `RUNONCE_TARGET` form built from its fields,
    so that a field added to a target is in the JSON the proxy parses without a second edit."""

    kind: ClassVar[str]

    def as_json(self) -> dict[str, Any]:
        """The `RUNONCE_TARGET` form."""
        return {"kind": self.kind, **{each.name: getattr(self, each.name) for each in fields(self)}}


@dataclass(frozen=True)
class Workflow(_TargetForm):
    """Start an execution of a Workflows workflow, with the run key in its argument and labels."""

    workflow: str
    """`projects/P/locations/L/workflows/W`."""
    argument: dict[str, Any] = field(default_factory=dict)
    """The execution's argument (a JSON object); the proxy adds `runonce_idempotency_key`."""

    kind = "workflow"


@dataclass(frozen=True)
class CloudRunJob(_TargetForm):
    """Run a Cloud Run job, with the run key as the env variable `RUNONCE_IDEMPOTENCY_KEY`."""

    job: str
    """`projects/P/locations/L/jobs/J`."""
    overrides: dict[str, Any] = field(default_factory=dict)
    """`jobs.run` overrides (containerOverrides, taskCount, timeout)."""

    kind = "cloud_run_job"


@dataclass(frozen=True)
class BuildTrigger(_TargetForm):
    """Run a Cloud Build trigger, with the run key as the substitution `_RUNONCE_IDEMPOTENCY_KEY`."""

    trigger: str
    """`projects/P/locations/L/triggers/T`."""
    substitutions: dict[str, str] = field(default_factory=dict)
    """User substitutions, each starting with `_`."""
    source: dict[str, Any] = field(default_factory=dict)
    """The RepoSource to build (`branchName`, `tagName`, `commitSha`, ...)."""
    service_account: str = ""
    """The email of the service account the trigger runs its builds as, if it names one
    (`NAME@PROJECT.iam.gserviceaccount.com`): running such a trigger needs actAs on that account,
    so the proxy's account gets roles/iam.serviceAccountUser on it alone. "" (default): the
    trigger uses Cloud Build's default account, and nothing more is granted."""

    kind = "build_trigger"


@dataclass(frozen=True)
class GoogleApi(_TargetForm):
    """Any call to an `https://*.googleapis.com` URL, with the run key in the header
    `X-Runonce-Idempotency-Key`; `role` is what the proxy's account needs for it."""

    method: str
    """GET, POST, PUT, PATCH or DELETE."""
    url: str
    """An https URL on a `*.googleapis.com` host."""
    role: str
    """The role the call needs, granted to the proxy's account on the project (an arbitrary API
    names no resource the stack could grant it on)."""
    body: Any = None
    """The JSON body, if any."""

    kind = "googleapis"


Target = Workflow | CloudRunJob | BuildTrigger | GoogleApi
TARGET_CLASSES: tuple[type, ...] = (Workflow, CloudRunJob, BuildTrigger, GoogleApi)


def target_json(target: Target) -> str:
    """`RUNONCE_TARGET`: the target as compact, key-sorted JSON (a stable function setting). A
    value JSON cannot hold is written as its repr, so that validation can still group the jobs;
    `stacks.validate.targets.target_problems` reports it, and such a team is never deployed."""
    return json.dumps(target.as_json(), sort_keys=True, separators=(",", ":"), default=repr)
