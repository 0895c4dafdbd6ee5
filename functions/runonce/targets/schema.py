"""Google API targets: what the proxy starts for a run, how the run key travels, how it is found again.

A target is read from `RUNONCE_TARGET` (one JSON object, see docs/targets.md) and is one of:

- `workflow`: a Workflows execution; the key goes into the execution `argument` and, in a
  label-safe form, into the execution `labels`, so `executions.list` can find it again;
- `cloud_run_job`: a Cloud Run job run; the key goes into every container override's `env`.
  Cloud Run offers no way to label one execution, so nothing can be found again;
- `build_trigger`: a Cloud Build trigger run; the key goes into the run's `substitutions`, and a
  build is recognised by that substitution among the trigger's builds;
- `googleapis`: any `https://*.googleapis.com` call; the key goes into a request header.

Every shape here is plain data: a `Call` says what to send, the proxy sends it.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

from .. import contract
from ..core.errors import ConfigError, RunonceError

# The proxy's variables, and where the run key travels (the downstream services read it there),
# under the names the proxy uses; runonce.contract spells them.
TARGET_VARIABLE = contract.TARGET_VARIABLE
BASE_URL_VARIABLE = contract.TARGET_BASE_URL_VARIABLE
TIMEOUT_VARIABLE = contract.TARGET_TIMEOUT_VARIABLE
GRACE_VARIABLE = contract.TARGET_GRACE_VARIABLE
IDEMPOTENCY_HEADER = contract.IDEMPOTENCY_HEADER
ARGUMENT_FIELD = contract.IDEMPOTENCY_ARGUMENT_FIELD
ENV_NAME = contract.IDEMPOTENCY_ENV_VARIABLE
SUBSTITUTION = contract.IDEMPOTENCY_SUBSTITUTION
LABEL_KEY = "runonce_run"
# Workflows label values hold at most 63 lowercase letters, digits, "_" and "-".
LABEL_VALUE_LENGTH = 63

_WORKFLOW = re.compile(r"^projects/[^/]+/locations/[^/]+/workflows/[^/]+$")
_JOB = re.compile(r"^projects/[^/]+/locations/[^/]+/jobs/[^/]+$")
_TRIGGER = re.compile(
    r"^projects/(?P<project>[^/]+)/locations/(?P<location>[^/]+)/triggers/(?P<trigger>[^/]+)$"
)
_METHODS = {"GET", "POST", "PUT", "PATCH", "DELETE"}


class Unreadable(RunonceError, ValueError):
    """A 2xx answer the proxy cannot read: cut off, not JSON, or without the expected name."""


def _entries(listing: Any, field_name: str) -> list[Mapping[str, Any]]:
    """The resources of a list answer; Unreadable if it is not a list answer at all."""
    if not isinstance(listing, Mapping):
        raise Unreadable(f"is not a JSON object ({type(listing).__name__})")
    entries = listing.get(field_name) or []
    if not isinstance(entries, list):
        raise Unreadable(f"has {field_name!r} that is not a list")
    return [entry for entry in entries if isinstance(entry, Mapping)]


def _name(answer: Any, pattern: re.Pattern[str], what: str) -> str:
    """The answer's `name`, which must match `pattern`; Unreadable otherwise."""
    if not isinstance(answer, Mapping):
        raise Unreadable(f"is not a JSON object ({type(answer).__name__})")
    name = answer.get("name")
    if not isinstance(name, str) or not name:
        raise Unreadable(f"has no {what} name")
    if not pattern.match(name):
        raise Unreadable(f"names {name!r}, not {what}")
    return name


def _child(parent: str, collection: str) -> re.Pattern[str]:
    """`parent/collection/ID`, the project as an id or a number (APIs answer with either)."""
    _, _, rest = parent.partition("/")  # drop "projects"
    _, _, rest = rest.partition("/")  # drop the project
    return re.compile(rf"^projects/[^/]+/{re.escape(rest)}/{collection}/[^/]+$")


# A long-running operation's name; its exact form differs between endpoints (regional
# `projects/P/locations/L/operations/ID`, Cloud Build's global `operations/build/P/ID`).
_OPERATION = re.compile(r"^(.+/)?operations/[^/]+")


def label_value(key: str) -> str:
    """The run key as a label value: its first 63 hex characters (252 of its 256 bits)."""
    return key[:LABEL_VALUE_LENGTH]


@dataclass(frozen=True)
class Call:
    """One REST call: method, absolute https URL on a googleapis.com host, query, JSON body, headers."""

    method: str
    url: str
    params: dict[str, str] = field(default_factory=dict)
    body: Any = None
    headers: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Workflow:
    """Start an execution of a workflow: `projects/P/locations/L/workflows/W`."""

    workflow: str
    argument: dict[str, Any] = field(default_factory=dict)
    kind = "workflow"
    host = "https://workflowexecutions.googleapis.com"

    def start(self, key: str) -> Call:
        """executions.create with the key in the argument and, label-safe, in the labels."""
        argument = {**self.argument, ARGUMENT_FIELD: key}
        return Call(
            "POST",
            f"{self.host}/v1/{self.workflow}/executions",
            body={"argument": json.dumps(argument), "labels": {LABEL_KEY: label_value(key)}},
        )

    def lookup(self, key: str) -> Call:
        """executions.list filtered on the label; FULL view, since BASIC leaves labels out."""
        return Call(
            "GET",
            f"{self.host}/v1/{self.workflow}/executions",
            params={"filter": f'labels.{LABEL_KEY}="{label_value(key)}"', "view": "FULL", "pageSize": "100"},
        )

    def found(self, listing: Any, key: str) -> dict[str, Any] | None:
        """The execution of this run in a listing, checked here too: a filter is not trusted blindly."""
        for execution in _entries(listing, "executions"):
            labels = execution.get("labels")
            if isinstance(labels, Mapping) and labels.get(LABEL_KEY) == label_value(key):
                name = execution.get("name")
                return {"execution": name if isinstance(name, str) else None}
        return None

    def started(self, answer: Any) -> dict[str, Any]:
        """The created execution's name, which must be an execution of this workflow."""
        pattern = _child(self.workflow, "executions")
        return {"execution": _name(answer, pattern, f"an execution of {self.workflow}")}


@dataclass(frozen=True)
class CloudRunJob:
    """Run a Cloud Run job `projects/P/locations/L/jobs/J`, optionally with run overrides."""

    job: str
    overrides: dict[str, Any] = field(default_factory=dict)
    kind = "cloud_run_job"
    host = "https://run.googleapis.com"

    def start(self, key: str) -> Call:
        """jobs.run with the key added to every container override's env (one override if none)."""
        overrides = dict(self.overrides)
        containers = [dict(container) for container in overrides.get("containerOverrides") or [{}]]
        for container in containers:
            env = [item for item in container.get("env", []) if item.get("name") != ENV_NAME]
            container["env"] = [*env, {"name": ENV_NAME, "value": key}]
        overrides["containerOverrides"] = containers
        return Call("POST", f"{self.host}/v2/{self.job}:run", body={"overrides": overrides})

    def lookup(self, key: str) -> Call | None:
        """None: one job execution cannot be labelled per run, so a lost start cannot be found again."""
        return None

    def found(self, listing: Any, key: str) -> dict[str, Any] | None:
        """Never called: there is no lookup."""
        return None

    def started(self, answer: Any) -> dict[str, Any]:
        """The long-running operation's name, and the execution's name from its metadata (None
        if the metadata does not name an execution of this job)."""
        operation = _name(answer, _OPERATION, "an operation")
        metadata = answer.get("metadata")
        execution = metadata.get("name") if isinstance(metadata, Mapping) else None
        if not (isinstance(execution, str) and _child(self.job, "executions").match(execution)):
            execution = None
        return {"operation": operation, "execution": execution}


@dataclass(frozen=True)
class BuildTrigger:
    """Run a Cloud Build trigger `projects/P/locations/L/triggers/T` with substitutions and a source."""

    trigger: str
    substitutions: dict[str, str] = field(default_factory=dict)
    source: dict[str, Any] = field(default_factory=dict)
    kind = "build_trigger"
    host = "https://cloudbuild.googleapis.com"

    def _parts(self) -> dict[str, str]:
        match = _TRIGGER.match(self.trigger)
        assert match is not None  # validated when the target was parsed
        return match.groupdict()

    def start(self, key: str) -> Call:
        """triggers.run with the key as the `_RUNONCE_IDEMPOTENCY_KEY` substitution."""
        parts = self._parts()
        source = {**self.source, "substitutions": {**self.substitutions, SUBSTITUTION: key}}
        body = {"projectId": parts["project"], "triggerId": parts["trigger"], "source": source}
        return Call("POST", f"{self.host}/v1/{self.trigger}:run", body=body)

    def lookup(self, key: str) -> Call:
        """builds.list of this trigger's builds (newest first); the substitution is matched here."""
        parts = self._parts()
        return Call(
            "GET",
            f"{self.host}/v1/projects/{parts['project']}/locations/{parts['location']}/builds",
            params={
                "projectId": parts["project"],
                "filter": f'trigger_id="{parts["trigger"]}"',
                "pageSize": "100",
            },
        )

    def found(self, listing: Any, key: str) -> dict[str, Any] | None:
        """The build whose substitutions carry this run's key."""
        for build in _entries(listing, "builds"):
            substitutions = build.get("substitutions")
            if isinstance(substitutions, Mapping) and substitutions.get(SUBSTITUTION) == key:
                return {"build": _build_name(build)}
        return None

    def started(self, answer: Any) -> dict[str, Any]:
        """The operation's name and the build's name (or id) from its metadata, if it has one."""
        operation = _name(answer, _OPERATION, "an operation")
        metadata = answer.get("metadata")
        build = metadata.get("build") if isinstance(metadata, Mapping) else None
        return {"operation": operation, "build": _build_name(build) if isinstance(build, Mapping) else None}


@dataclass(frozen=True)
class GoogleApi:
    """Any call to an `https://*.googleapis.com` URL; `role` documents what the proxy's account needs."""

    method: str
    url: str
    body: Any = None
    role: str | None = None
    kind = "googleapis"

    @property
    def host(self) -> str:
        """Scheme and host of the URL."""
        parts = urlsplit(self.url)
        return f"{parts.scheme}://{parts.netloc}"

    def start(self, key: str) -> Call:
        """The configured call, with the key in the `X-Runonce-Idempotency-Key` header."""
        return Call(self.method, self.url, body=self.body, headers={IDEMPOTENCY_HEADER: key})

    def lookup(self, key: str) -> Call | None:
        """None: an arbitrary API has no known way to find what an earlier call did."""
        return None

    def found(self, listing: Any, key: str) -> dict[str, Any] | None:
        """Never called: there is no lookup."""
        return None

    def started(self, answer: Any) -> dict[str, Any]:
        """The answer's `name` (an operation or a created resource), if it has one."""
        name = answer.get("name") if isinstance(answer, Mapping) else None
        return {"name": name if isinstance(name, str) else None}


def _build_name(build: Mapping[str, Any]) -> str | None:
    name = build.get("name") or build.get("id")
    return name if isinstance(name, str) else None


Target = Workflow | CloudRunJob | BuildTrigger | GoogleApi


def _field(config: Mapping[str, Any], name: str, kind: str, pattern: re.Pattern[str] | None = None) -> str:
    value = config.get(name)
    if not isinstance(value, str) or not value:
        raise ConfigError(f"{TARGET_VARIABLE}: a {kind} target needs {name!r} (a string)")
    if pattern is not None and not pattern.match(value):
        raise ConfigError(f"{TARGET_VARIABLE}: {name}={value!r} does not look like {pattern.pattern}")
    return value


def _mapping(config: Mapping[str, Any], name: str) -> dict[str, Any]:
    value = config.get(name, {})
    if not isinstance(value, dict):
        raise ConfigError(f"{TARGET_VARIABLE}: {name!r} must be a JSON object, not {type(value).__name__}")
    return value


def _googleapis_url(url: str) -> str:
    parts = urlsplit(url)
    if parts.scheme != "https" or not (parts.hostname or "").endswith(".googleapis.com"):
        raise ConfigError(
            f"{TARGET_VARIABLE}: url={url!r} must be https on a *.googleapis.com host; "
            "other endpoints are not Google API targets"
        )
    return url


def parse_target(config: Mapping[str, Any]) -> Target:
    """Build a target from its JSON form; ConfigError names the field and what it should be."""
    kind = config.get("kind")
    if kind == "workflow":
        return Workflow(_field(config, "workflow", kind, _WORKFLOW), _mapping(config, "argument"))
    if kind == "cloud_run_job":
        return CloudRunJob(_field(config, "job", kind, _JOB), _mapping(config, "overrides"))
    if kind == "build_trigger":
        substitutions = _mapping(config, "substitutions")
        if any(not name.startswith("_") for name in substitutions):
            raise ConfigError(f"{TARGET_VARIABLE}: user substitutions must start with '_' (Cloud Build rule)")
        return BuildTrigger(
            _field(config, "trigger", kind, _TRIGGER), substitutions, _mapping(config, "source")
        )
    if kind == "googleapis":
        method = _field(config, "method", kind).upper()
        if method not in _METHODS:
            raise ConfigError(f"{TARGET_VARIABLE}: method={method!r} must be one of {sorted(_METHODS)}")
        role = config.get("role")
        return GoogleApi(method, _googleapis_url(_field(config, "url", kind)), config.get("body"), role)
    raise ConfigError(
        f"{TARGET_VARIABLE}: kind={kind!r} is not a target; "
        "use workflow, cloud_run_job, build_trigger or googleapis"
    )


def load_target(environ: Mapping[str, str]) -> Target:
    """The target named by RUNONCE_TARGET in `environ`."""
    raw = environ.get(TARGET_VARIABLE)
    if not raw:
        raise ConfigError(f"{TARGET_VARIABLE} is not set; set it to the target's JSON (see docs/targets.md)")
    try:
        config = json.loads(raw)
    except ValueError as exc:
        raise ConfigError(f"{TARGET_VARIABLE} is not valid JSON: {exc}") from None
    if not isinstance(config, dict):
        raise ConfigError(f"{TARGET_VARIABLE} must be a JSON object with a 'kind'")
    return parse_target(config)
