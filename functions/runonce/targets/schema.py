"""Google API targets: what the proxy starts for a run, how the run key travels, how it is found again.

A target is read from `RUNONCE_TARGET` (one JSON object, see docs/targets.md) and is one of:

- `workflow`: a Workflows execution; the key goes into the execution `argument` and, in a
  label-safe form, into the execution `labels`, so `executions.list` can find it again;
- `cloud_run_job`: a Cloud Run job run; the key goes into every container override's `env`.
  Cloud Run offers no way to label one execution, so nothing can be found again;
- `build_trigger`: a Cloud Build trigger run; the key goes into the run's `substitutions`, and a
  build is recognised by that substitution among the trigger's builds;
- `googleapis`: any `https://*.googleapis.com` call; the key goes into a request header.

Every shape here is plain data: a `Call` says what to send, the proxy sends it. These classes
are also what a team file writes (`Job(target=Workflow(...))`, re-exported by `stacks.targets`),
and `problems` is the one check of a target's JSON form: the proxy raises its first problem as a
ConfigError, the stacks report every one before anything is deployed.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from typing import Any, ClassVar, NamedTuple
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

WORKFLOW_NAME = re.compile(
    r"^projects/(?P<project>[^/]+)/locations/(?P<location>[^/]+)/workflows/(?P<name>[^/]+)$"
)
JOB_NAME = re.compile(r"^projects/(?P<project>[^/]+)/locations/(?P<location>[^/]+)/jobs/(?P<name>[^/]+)$")
TRIGGER_NAME = re.compile(
    r"^projects/(?P<project>[^/]+)/locations/(?P<location>[^/]+)/triggers/(?P<name>[^/]+)$"
)
METHODS = ("GET", "POST", "PUT", "PATCH", "DELETE")
KINDS = "workflow, cloud_run_job, build_trigger or googleapis"

DEFAULT_TIMEOUT_SECONDS = 30
"""The proxy's timeout per call to the target's API unless RUNONCE_TARGET_TIMEOUT_SECONDS says otherwise."""
GRACE_MARGIN_SECONDS = 60
"""Added to the call timeout to give the default grace: how long after the proxy gave up on a
start the start may still commit and show up in the target's list (docs/targets.md, "Grace")."""
CALLS_PER_ATTEMPT = 3
"""At most, per attempt: look for an earlier start, start, and look once more after a lost answer."""


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
class _Form:
    """What every target shares: its `kind`, and its `RUNONCE_TARGET` form built from its fields,
    so that a field added to a target is in the JSON the proxy parses without a second edit."""

    kind: ClassVar[str]

    def as_json(self) -> dict[str, Any]:
        """The `RUNONCE_TARGET` form: `kind` and every field."""
        return {"kind": self.kind, **{each.name: getattr(self, each.name) for each in fields(self)}}


@dataclass(frozen=True)
class Workflow(_Form):
    """Start an execution of a Workflows workflow, with the run key in its argument and labels."""

    workflow: str
    """`projects/P/locations/L/workflows/W`."""
    argument: dict[str, Any] = field(default_factory=dict)
    """The execution's argument (a JSON object); the proxy adds `runonce_idempotency_key`."""
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
class CloudRunJob(_Form):
    """Run a Cloud Run job, with the run key as the env variable `RUNONCE_IDEMPOTENCY_KEY`."""

    job: str
    """`projects/P/locations/L/jobs/J`."""
    overrides: dict[str, Any] = field(default_factory=dict)
    """`jobs.run` overrides (containerOverrides, taskCount, timeout)."""
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
class BuildTrigger(_Form):
    """Run a Cloud Build trigger, with the run key as the substitution `_RUNONCE_IDEMPOTENCY_KEY`."""

    trigger: str
    """`projects/P/locations/L/triggers/T`."""
    substitutions: dict[str, str] = field(default_factory=dict)
    """User substitutions, each starting with `_`."""
    source: dict[str, Any] = field(default_factory=dict)
    """The RepoSource to build (`branchName`, `tagName`, `commitSha`, ...)."""
    service_account: str = ""
    """Read by the stack alone: the email of the service account the trigger runs its builds as,
    if it names one (`NAME@PROJECT.iam.gserviceaccount.com`): running such a trigger needs actAs
    on that account, so the proxy's account gets roles/iam.serviceAccountUser on it alone. ""
    (default): the trigger uses Cloud Build's default account, and nothing more is granted."""
    kind = "build_trigger"
    host = "https://cloudbuild.googleapis.com"

    def _parts(self) -> dict[str, str]:
        match = TRIGGER_NAME.match(self.trigger)
        assert match is not None  # validated when the target was parsed
        return match.groupdict()

    def start(self, key: str) -> Call:
        """triggers.run with the key as the `_RUNONCE_IDEMPOTENCY_KEY` substitution."""
        parts = self._parts()
        source = {**self.source, "substitutions": {**self.substitutions, SUBSTITUTION: key}}
        body = {"projectId": parts["project"], "triggerId": parts["name"], "source": source}
        return Call("POST", f"{self.host}/v1/{self.trigger}:run", body=body)

    def lookup(self, key: str) -> Call:
        """builds.list of this trigger's builds (newest first); the substitution is matched here."""
        parts = self._parts()
        return Call(
            "GET",
            f"{self.host}/v1/projects/{parts['project']}/locations/{parts['location']}/builds",
            params={
                "projectId": parts["project"],
                "filter": f'trigger_id="{parts["name"]}"',
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
class GoogleApi(_Form):
    """Any call to an `https://*.googleapis.com` URL, with the run key in the header
    `X-Runonce-Idempotency-Key`; `role` is what the proxy's account needs for it."""

    method: str
    """GET, POST, PUT, PATCH or DELETE."""
    url: str
    """An https URL on a `*.googleapis.com` host."""
    role: str | None = None
    """Read by the stack alone (a team file must give it): the role the call needs, granted to the
    proxy's account on the project (an arbitrary API names no resource to grant it on)."""
    body: Any = None
    """The JSON body, if any."""
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


TARGET_CLASSES: tuple[type[_Form], ...] = (Workflow, CloudRunJob, BuildTrigger, GoogleApi)


def target_json(target: Target) -> str:
    """`RUNONCE_TARGET`: the target as compact, key-sorted JSON (a stable function setting). A
    value JSON cannot hold is written as its repr, so that the stacks can still group the jobs;
    their validation reports it, and such a team is never deployed."""
    return json.dumps(target.as_json(), sort_keys=True, separators=(",", ":"), default=repr)


class Problem(NamedTuple):
    """One way a target's JSON form cannot be started: the field, what is wrong, and the fix."""

    field: str
    message: str
    fix: str


_NAMES = {
    "workflow": ("workflow", WORKFLOW_NAME, "a workflow name", "projects/P/locations/L/workflows/W"),
    "cloud_run_job": ("job", JOB_NAME, "a Cloud Run job name", "projects/P/locations/L/jobs/J"),
    "build_trigger": ("trigger", TRIGGER_NAME, "a build trigger name", "projects/P/locations/L/triggers/T"),
}
_OBJECTS = {
    "workflow": ("argument",),
    "cloud_run_job": ("overrides",),
    "build_trigger": ("substitutions", "source"),
}


def problems(config: Mapping[str, Any]) -> list[Problem]:
    """Every way the target's JSON form `config` cannot be started, each naming its field."""
    kind = config.get("kind")
    if kind not in (*_NAMES, "googleapis"):
        return [Problem("kind", f"kind={kind!r} is not a target", f"use {KINDS}")]
    found: list[Problem] = []
    if kind in _NAMES:
        name, pattern, what, form = _NAMES[kind]
        value = config.get(name)
        if not isinstance(value, str) or not value:
            found.append(Problem(name, f"a {kind} target needs {name!r} (a string)", f"write {form}"))
        elif not pattern.match(value):
            found.append(Problem(name, f"{name}={value!r} does not look like {what}", f"write {form}"))
    for name in _OBJECTS.get(kind, ()):
        value = config.get(name, {})
        if not isinstance(value, dict):
            message = f"{name!r} must be a JSON object, not {type(value).__name__}"
            found.append(Problem(name, message, "give a JSON object (a dict)"))
    substitutions = config.get("substitutions")
    named = isinstance(substitutions, dict) and all(str(name).startswith("_") for name in substitutions)
    if kind == "build_trigger" and isinstance(substitutions, dict) and not named:
        message = "user substitutions must start with '_' (Cloud Build's rule)"
        found.append(Problem("substitutions", message, "rename them _NAME"))
    if kind == "googleapis":
        found.extend(_call_problems(config))
    return found


def _call_problems(config: Mapping[str, Any]) -> list[Problem]:
    found: list[Problem] = []
    method = config.get("method")
    if not isinstance(method, str) or method.upper() not in METHODS:
        message = f"method={method!r} must be one of {', '.join(METHODS)}"
        found.append(Problem("method", message, "give the HTTP method the call needs"))
    url = config.get("url")
    if not isinstance(url, str) or not url:
        found.append(Problem("url", "a googleapis target needs 'url' (a string)", "give the API's https URL"))
    else:
        parts = urlsplit(url)
        if parts.scheme != "https" or not (parts.hostname or "").endswith(".googleapis.com"):
            message = f"url={url!r} must be https on a *.googleapis.com host"
            found.append(
                Problem("url", message, "call a Google API over https; other endpoints are not targets")
            )
    return found


def parse_target(config: Mapping[str, Any]) -> Target:
    """Build a target from its JSON form; ConfigError names the field and what it should be."""
    found = problems(config)
    if found:
        first = found[0]
        raise ConfigError(f"{TARGET_VARIABLE}: {first.message}; {first.fix}")
    kind = config["kind"]
    if kind == "workflow":
        return Workflow(config["workflow"], config.get("argument", {}))
    if kind == "cloud_run_job":
        return CloudRunJob(config["job"], config.get("overrides", {}))
    if kind == "build_trigger":
        return BuildTrigger(
            config["trigger"],
            config.get("substitutions", {}),
            config.get("source", {}),
            config.get("service_account") or "",
        )
    return GoogleApi(config["method"].upper(), config["url"], config.get("role"), config.get("body"))


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
