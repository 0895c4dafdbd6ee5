"""A local stand-in for the few Google API calls the runonce proxy makes.

No emulator exists for Workflows, Cloud Run jobs or Cloud Build, so this threaded HTTP server on
127.0.0.1 implements the subset the proxy uses, in the same REST shapes:

- Workflows: executions create, list (with a `labels.KEY="VALUE"` filter), get;
- Cloud Run: `jobs/*:run` (answers a long-running operation whose metadata is the execution), get;
- Cloud Build: `triggers/*:run` (an operation whose metadata holds the build), builds list (with a
  `trigger_id="T"` filter), get;
- Cloud Scheduler: `jobs/*:pause` and `jobs/*:resume` on a job the test stored (its `state`
  becomes PAUSED or ENABLED, its `userUpdateTime` the stand-in's `clock`; 404 for another), get;
- any other path: recorded and answered with a new operation, for generic googleapis calls.

Every request is recorded. Faults are queued per call and taken in order by the first matching
request: `fail` answers an error status without doing anything (Google's JSON error with a
canonical `status`, or a raw body such as a front end's HTML), `hang` waits before handling
(and then does the work or not), `drop` does the work and closes the connection without an
answer, `answer` answers a raw status and body of the test's choosing (after doing the work, or
not), `cut` does the work and closes the connection halfway through its answer's body, `drip`
does the work and sends its answer one byte every `seconds` (a slow start). A hook
may run when something is started, to play its body (the workflow, the job, the build).
"""

from __future__ import annotations

import json
import re
import sys
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

_EXECUTIONS = re.compile(r"^/v1/(?P<parent>projects/[^/]+/locations/[^/]+/workflows/[^/]+)/executions$")
_JOB_RUN = re.compile(
    r"^/v2/(?P<job>projects/(?P<project>[^/]+)/locations/(?P<location>[^/]+)/jobs/[^/]+):run$"
)
_TRIGGER_RUN = re.compile(
    r"^/v1/projects/(?P<project>[^/]+)/locations/(?P<location>[^/]+)/triggers/(?P<trigger>[^/]+):run$"
)
_SCHEDULER_STATE = re.compile(
    r"^/v1/(?P<job>projects/[^/]+/locations/[^/]+/jobs/[^/:]+):(?P<verb>pause|resume)$"
)
_BUILDS = re.compile(r"^/v1/projects/(?P<project>[^/]+)/locations/(?P<location>[^/]+)/builds$")
_LABEL_FILTER = re.compile(r'^labels\.(?P<key>[a-z][a-z0-9_-]*)="(?P<value>[^"]*)"$')
_TRIGGER_FILTER = re.compile(r'^trigger_id="(?P<trigger>[^"]*)"$')
_STATUS_NAMES = {
    400: "INVALID_ARGUMENT",
    401: "UNAUTHENTICATED",
    403: "PERMISSION_DENIED",
    404: "NOT_FOUND",
    409: "ABORTED",
    429: "RESOURCE_EXHAUSTED",
    500: "INTERNAL",
    501: "UNIMPLEMENTED",
    503: "UNAVAILABLE",
    504: "DEADLINE_EXCEEDED",
}


@dataclass(frozen=True)
class Recorded:
    """One request as the stand-in received it."""

    method: str
    path: str
    query: dict[str, str]
    headers: dict[str, str]
    body: Any


@dataclass(frozen=True)
class Started:
    """Something the stand-in started, and the request that started it."""

    resource: dict[str, Any]
    """The workflow execution, job execution, build, or a generic call's operation."""
    request: Recorded


@dataclass
class Fault:
    """What to do instead of a plain answer, for the next request matching `method` and `path_contains`."""

    kind: str
    """"fail" (answer `status`, do nothing), "hang" (sleep `seconds`, then work if `commit`),
    "drop", "answer" (work if `commit`, then answer `status` with `body`), "cut", "drip"."""
    method: str = "POST"
    path_contains: str = ""
    status: int = 503
    seconds: float = 0.0
    commit: bool = True
    code: str | None = None
    """"fail": the canonical code in the JSON error's `status` (None: the usual one for `status`)."""
    body: str | None = None
    """"fail" and "answer": the raw body to answer instead of Google's JSON."""
    content_type: str = "application/json"

    def matches(self, method: str, path: str) -> bool:
        """Whether this fault applies to a request."""
        return method == self.method and self.path_contains in path


@dataclass
class _State:
    resources: dict[str, dict[str, Any]] = field(default_factory=dict)
    calls: list[Recorded] = field(default_factory=list)
    started: list[Started] = field(default_factory=list)
    faults: list[Fault] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)


class _Handler(BaseHTTPRequestHandler):
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:
        return  # quiet: the recorded calls are the log

    def do_GET(self) -> None:
        self._handle()

    def do_POST(self) -> None:
        self._handle()

    def do_PUT(self) -> None:
        self._handle()

    def do_PATCH(self) -> None:
        self._handle()

    def do_DELETE(self) -> None:
        self._handle()

    def _handle(self) -> None:
        parts = urlsplit(self.path)
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        try:
            body = json.loads(raw) if raw else None
        except ValueError:
            body = raw.decode("utf-8", "replace")
        query = {name: values[-1] for name, values in parse_qs(parts.query).items()}
        call = Recorded(
            self.command, parts.path, query, {k.lower(): v for k, v in self.headers.items()}, body
        )
        stand_in = self.server.stand_in
        fault = stand_in._record(call)
        if fault is not None and fault.kind == "fail":
            if fault.body is not None:
                self._send_raw(fault.status, fault.body.encode(), fault.content_type)
            else:
                message = f"injected fault on {parts.path}"
                self._answer(fault.status, _error(fault.status, message, fault.code))
            return
        if fault is not None and fault.kind == "answer":
            if fault.commit:
                stand_in._serve(call)
            self._send_raw(fault.status, (fault.body or "").encode(), fault.content_type)
            return
        if fault is not None and fault.kind == "hang":
            time.sleep(fault.seconds)
            if not fault.commit:
                self.close_connection = True
                return
        status, answer = stand_in._serve(call)
        if fault is not None and fault.kind in ("drop", "hang"):
            # The work is done; the answer is lost on the way back.
            self.close_connection = True
            return
        if fault is not None and fault.kind == "cut":
            data = json.dumps(answer).encode()
            self._send_raw(status, data, "application/json", sent=len(data) // 2)
            return
        if fault is not None and fault.kind == "drip":
            self._drip(status, json.dumps(answer).encode(), fault.seconds)
            return
        self._answer(status, answer)

    def _answer(self, status: int, answer: Any) -> None:
        self._send_raw(status, json.dumps(answer).encode(), "application/json")

    def _drip(self, status: int, data: bytes, seconds: float) -> None:
        """Answer `data` one byte every `seconds`, until it is sent or the caller has gone."""
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        for byte in data:
            self.wfile.write(bytes([byte]))
            self.wfile.flush()
            time.sleep(seconds)

    def _send_raw(self, status: int, data: bytes, content_type: str, sent: int | None = None) -> None:
        """Answer `data`; with `sent`, only its first `sent` bytes, then the connection is closed."""
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data if sent is None else data[:sent])
        if sent is not None:
            self.wfile.flush()
            self.close_connection = True


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    stand_in: GoogleApisStandIn

    def handle_error(self, request: Any, client_address: Any) -> None:
        # A caller that went away (its instance killed, its timeout passed) is expected here;
        # anything else is printed as before.
        if not isinstance(sys.exc_info()[1], ConnectionError):
            super().handle_error(request, client_address)


def _error(status: int, message: str, code: str | None = None) -> dict[str, Any]:
    """Google's JSON error (AIP-193): the HTTP status, a message and the canonical code, which
    an HTTP status no code maps to (408, 502) goes without."""
    canonical = code or _STATUS_NAMES.get(status)
    error: dict[str, Any] = {"code": status, "message": message}
    if canonical is not None:
        error["status"] = canonical
    return {"error": error}


def _now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


class GoogleApisStandIn:
    """The server: start() it, point the proxy's base URL at `url`, read `calls`, queue faults."""

    def __init__(self) -> None:
        self._state = _State()
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None
        self.on_start: Callable[[dict[str, Any]], None] | None = None
        """Called with everything started (a workflow execution, job execution, build, or a generic
        call's operation): plays its body."""
        self.clock: Callable[[], str] = _now
        """The time a Scheduler job's pause or resume records (RFC 3339); tests set their own."""

    def start(self) -> GoogleApisStandIn:
        """Listen on a free loopback port and serve in a background thread."""
        self._server = _Server(("127.0.0.1", 0), _Handler)
        self._server.stand_in = self
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving and close the socket."""
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    @property
    def url(self) -> str:
        """Base URL, e.g. http://127.0.0.1:PORT."""
        assert self._server is not None, "start() the stand-in first"
        host, port = self._server.server_address[:2]
        assert isinstance(host, str), "an AF_INET server's host is text"
        return f"http://{host}:{port}"

    @property
    def calls(self) -> list[Recorded]:
        """Every request received so far, in order."""
        with self._state.lock:
            return list(self._state.calls)

    def starts(self) -> list[Recorded]:
        """The requests that start something (every POST)."""
        return [call for call in self.calls if call.method == "POST"]

    def started(self) -> list[Started]:
        """Everything started so far, in order, once each (not the operations wrapping a start)."""
        with self._state.lock:
            return list(self._state.started)

    def resources(self, kind: str) -> list[dict[str, Any]]:
        """Stored resources whose name contains `/{kind}/` (executions, builds, operations)."""
        with self._state.lock:
            return [dict(value) for name, value in self._state.resources.items() if f"/{kind}/" in name]

    def inject(self, fault: Fault, times: int = 1) -> None:
        """Queue a fault for the next `times` matching requests."""
        with self._state.lock:
            self._state.faults.extend(Fault(**vars(fault)) for _ in range(times))

    def _record(self, call: Recorded) -> Fault | None:
        with self._state.lock:
            self._state.calls.append(call)
            for index, fault in enumerate(self._state.faults):
                if fault.matches(call.method, call.path):
                    return self._state.faults.pop(index)
        return None

    def _store(self, resource: dict[str, Any]) -> dict[str, Any]:
        with self._state.lock:
            self._state.resources[resource["name"]] = resource
        return resource

    def _serve(self, call: Recorded) -> tuple[int, Any]:
        path = call.path
        if match := _EXECUTIONS.match(path):
            if call.method == "POST":
                return 200, self._create_execution(match["parent"], call)
            return self._list_executions(match["parent"], call.query.get("filter", ""))
        if (match := _JOB_RUN.match(path)) and call.method == "POST":
            return 200, self._run_job(match, call)
        if (match := _TRIGGER_RUN.match(path)) and call.method == "POST":
            return 200, self._run_trigger(match, call)
        if (match := _SCHEDULER_STATE.match(path)) and call.method == "POST":
            return self._set_scheduler_state(
                match["job"], "PAUSED" if match["verb"] == "pause" else "ENABLED"
            )
        if (match := _BUILDS.match(path)) and call.method == "GET":
            return self._list_builds(match["project"], match["location"], call.query.get("filter", ""))
        if call.method == "GET":
            with self._state.lock:
                found = self._state.resources.get(path.split("/", 2)[-1])
            return (200, found) if found is not None else (404, _error(404, f"{path} not found"))
        operation = {"name": f"operations/{uuid.uuid4().hex}", "done": True, "request": call.body}
        self._store(operation)
        self._started(operation, call)
        return 200, operation

    def _set_scheduler_state(self, name: str, state: str) -> tuple[int, Any]:
        with self._state.lock:
            job = self._state.resources.get(name)
            if job is None:
                return 404, _error(404, f"Job {name} not found")
            job = self._state.resources[name] = {**job, "state": state, "userUpdateTime": self.clock()}
            return 200, dict(job)

    def _create_execution(self, parent: str, call: Recorded) -> dict[str, Any]:
        body = call.body or {}
        execution = self._store(
            {
                "name": f"{parent}/executions/{uuid.uuid4()}",
                "state": "ACTIVE",
                "argument": body.get("argument", "{}"),
                "labels": body.get("labels", {}),
                "createTime": _now(),
            }
        )
        self._started(execution, call)
        return execution

    def _started(self, resource: dict[str, Any], call: Recorded) -> None:
        with self._state.lock:
            self._state.started.append(Started(dict(resource), call))
        if self.on_start is not None:
            self.on_start(resource)

    def _list_executions(self, parent: str, filter_text: str) -> tuple[int, Any]:
        wanted = _LABEL_FILTER.match(filter_text) if filter_text else None
        if filter_text and wanted is None:
            return 400, _error(400, f"filter not understood by the stand-in: {filter_text}")
        executions = [
            execution
            for execution in self.resources("executions")
            if execution["name"].startswith(parent + "/")
            and (wanted is None or execution["labels"].get(wanted["key"]) == wanted["value"])
        ]
        return 200, {"executions": sorted(executions, key=lambda e: e["createTime"], reverse=True)}

    def _run_job(self, match: re.Match[str], call: Recorded) -> dict[str, Any]:
        body = call.body or {}
        base = f"projects/{match['project']}/locations/{match['location']}"
        execution = self._store(
            {
                "name": f"{match['job']}/executions/{uuid.uuid4().hex[:8]}",
                "overrides": body.get("overrides", {}),
                "createTime": _now(),
            }
        )
        self._started(execution, call)
        return self._store(
            {
                "name": f"{base}/operations/{uuid.uuid4()}",
                "metadata": {"@type": "type.googleapis.com/google.cloud.run.v2.Execution", **execution},
            }
        )

    def _run_trigger(self, match: re.Match[str], call: Recorded) -> dict[str, Any]:
        body = call.body or {}
        build_id = str(uuid.uuid4())
        base = f"projects/{match['project']}/locations/{match['location']}"
        build = self._store(
            {
                "name": f"{base}/builds/{build_id}",
                "id": build_id,
                "buildTriggerId": match["trigger"],
                "substitutions": (body.get("source") or {}).get("substitutions", {}),
                "createTime": _now(),
            }
        )
        self._started(build, call)
        return self._store(
            {
                "name": f"{base}/operations/{uuid.uuid4()}",
                "metadata": {
                    "@type": "type.googleapis.com/google.devtools.cloudbuild.v1.BuildOperationMetadata",
                    "build": build,
                },
            }
        )

    def _list_builds(self, project: str, location: str, filter_text: str) -> tuple[int, Any]:
        wanted = _TRIGGER_FILTER.match(filter_text) if filter_text else None
        if filter_text and wanted is None:
            return 400, _error(400, f"filter not understood by the stand-in: {filter_text}")
        prefix = f"projects/{project}/locations/{location}/builds/"
        builds = [
            build
            for build in self.resources("builds")
            if build["name"].startswith(prefix)
            and (wanted is None or build["buildTriggerId"] == wanted["trigger"])
        ]
        return 200, {"builds": sorted(builds, key=lambda b: b["createTime"], reverse=True)}
