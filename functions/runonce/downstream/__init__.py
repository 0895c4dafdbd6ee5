"""Downstream idempotency: a service the run calls checks the token before every state-changing step.

The proxy (or any runonce job) passes the run key on as an idempotency token. The service that
changes state deduplicates on it with the same run store the scheduled runs use (`Store`: the
Firestore ledger in production), through that interface alone:

- `idempotent_endpoint`: an HTTP handler decorator keyed by the `X-Runonce-Idempotency-Key`
  header. The first request runs the handler and stores its answer (see `replay`); a repeat of
  the same request gets the stored answer back (with `X-Runonce-Replayed: true`) without running
  it; the same token with another request is refused 422; a repeat while the first still runs
  is answered 409. Every answer of its own is JSON with an `outcome` (see `EndpointOutcome`).
- `Steps.run(token, name, action)`: runs one state-changing step once per token; a repeat returns
  the stored result.

One record per (step or endpoint name, token), named by a hash of both, so one token can guard
many steps and tokens of any shape make valid document ids. The guarantee is the store's: a
step whose process dies after the effect and before its record is written runs again once its
lease expires, so an effect that must never repeat belongs in the same store, written atomically
with its own check, or must be idempotent itself.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import inspect
import io
import json
import logging
import os
import re
import threading
from collections.abc import Callable
from enum import Enum
from typing import Any
from urllib.parse import parse_qsl

import flask
from google.cloud import firestore
from werkzeug.exceptions import HTTPException

from .._logs import log
from .._text import clip, describe, type_name
from ..contract import RunStatus
from ..core.errors import (
    ConfigError,
    NotRunnable,
    PermanentError,
    RunonceError,
    StoreDenied,
    StoreError,
    StoreUnavailable,
)
from ..core.finish import RETRYABLE_4XX
from ..core.store import Claim, Held, Store, StoredResult
from ..store.connection import Connection
from ..targets.schema import IDEMPOTENCY_HEADER
from .replay import REPLAYED_HEADER, HttpAnswer, not_stored, replay

__all__ = ["REPLAYED_HEADER", "EndpointOutcome", "StepInProgress", "Steps", "idempotent_endpoint", "step_key"]

DEFAULT_COLLECTION = "runonce_downstream"
COLLECTION_VARIABLE = "RUNONCE_DOWNSTREAM_COLLECTION"
# Bump only with a migration: stored step records are found by keys of this version.
STEP_KEY_VERSION = "runonce/step/v1"
# Bump only with a migration: a repeat is compared with its first request by this fingerprint.
FINGERPRINT_VERSION = "runonce/request/v1"
# Header names every server passes on: werkzeug's drops any with an underscore (serving.py), and
# other servers and proxies may too.
_HEADER_NAME = re.compile(r"[A-Za-z0-9-]+")


class StepInProgress(RunonceError):
    """Another attempt holds this step's claim and its lease is live: try again later."""


def step_key(token: str, name: str) -> str:
    """The record id of step `name` for idempotency token `token`."""
    encoded = json.dumps([STEP_KEY_VERSION, name, token], separators=(",", ":")).encode("utf-8")
    return hashlib.sha256(encoded).hexdigest()


class _StoreSource:
    """The store, built on first use: RUNONCE_* variables as for `@deduplicated`, but the
    collection is RUNONCE_DOWNSTREAM_COLLECTION (default runonce_downstream), apart from runs.
    ConfigError (an invalid setting, no credentials, no project) is raised at every use until fixed."""

    def __init__(self, options: dict[str, Any], client: firestore.Client | None):
        self._options = options
        self._client = client
        self._lock = threading.Lock()
        self._store: Store | None = None

    def get(self) -> Store:
        with self._lock:
            if self._store is None:
                collection = os.environ.get(COLLECTION_VARIABLE, DEFAULT_COLLECTION)
                connection = Connection({"collection": collection, **self._options}, self._client)
                self._store = connection.get().store
            return self._store


class Steps:
    """Run state-changing steps once per idempotency token, on a run store.

    Options override the RUNONCE_* variables as for `@deduplicated`; `collection` defaults to
    RUNONCE_DOWNSTREAM_COLLECTION, else `runonce_downstream`. The lease must outlast the longest step.
    """

    def __init__(
        self,
        *,
        collection: str | None = None,
        lease: int | None = None,
        retention: int | None = None,
        database: str | None = None,
        client: firestore.Client | None = None,
    ):
        options = {"collection": collection, "lease": lease, "retention": retention, "database": database}
        self._source = _StoreSource({k: v for k, v in options.items() if v is not None}, client)

    @property
    def store(self) -> Store:
        """The store the steps are recorded in (built at first use; ConfigError until it can be)."""
        return self._source.get()

    def run(self, token: str, name: str, action: Callable[[], Any]) -> Any:
        """Run `action` unless step `name` already ran for `token`; its result as stored.

        The first call and every repeat return the same value: the result as JSON holds it (a
        tuple comes back a list; None if it is not JSON-like or too large to store). Raises
        StepInProgress while another attempt holds the step, PermanentError (again) for a step
        that failed permanently; any other exception from `action` releases the step so the next
        try runs it. The store failing raises runonce's StoreUnavailable, StoreRejected or
        StoreDenied (a StoreError), never a client library's exception.
        """
        store = self.store
        claim = store.claim(step_key(token, name), {"step": name, "token": token[:512]})
        if isinstance(claim, Held):
            if claim.status is RunStatus.COMPLETED:
                return claim.result
            if claim.status is RunStatus.FAILED:
                raise PermanentError(claim.error or f"step {name} failed earlier")
            raise StepInProgress(f"step {name} is running elsewhere for this token")
        try:
            result = action()
        except PermanentError as exc:
            store.fail(claim, describe(exc))
            raise
        except BaseException:
            store.release(claim)
            raise
        stored = StoredResult.of(result)
        recorded = store.complete(claim, stored)  # what the store refuses is recorded without it
        return (recorded or stored).value


class EndpointOutcome(Enum):
    """What `idempotent_endpoint` answers of its own: the body's `outcome` and the HTTP status.

    The handler's own answers (first and replayed) are not in this table; nor is a repeat of an
    answer too large to store, answered `duplicate` with the original status.
    """

    REJECTED = ("rejected", 400)
    PAYLOAD_MISMATCH = ("payload_mismatch", 422)
    FAILED = ("failed", 422)
    IN_PROGRESS = ("in_progress", 409)
    RETRY = ("retry", 500)
    STORE_UNAVAILABLE = ("store_unavailable", 500)
    MISCONFIGURED = ("misconfigured", 500)
    ERROR = ("error", 500)

    label: str
    status: int

    def __init__(self, label: str, status: int):
        self.label = label
        self.status = status

    def answer(self, **body: Any) -> tuple[dict[str, Any], int]:
        """The JSON body and status Flask sends back."""
        return {"outcome": self.label, **body}, self.status


def request_fingerprint(request: Any) -> str:
    """What makes two requests with one token the same request: method, path, query and body.

    A JSON body (by its content type) counts by its value, so the same JSON in another key order
    or spacing is the same request, as does a query with its parameters in another order; any
    other body counts byte for byte. The body is read here;
    Flask keeps it for `get_data`, `get_json` and `form`, and `request.stream` reads it again.
    """
    body: bytes = request.get_data(cache=True)
    request.stream = io.BytesIO(body)  # else a handler reading the stream would find it drained
    if request.is_json:
        # Not JSON after all (or too deep, or a huge number): then its bytes count.
        with contextlib.suppress(Exception):
            body = json.dumps(json.loads(body), sort_keys=True, separators=(",", ":")).encode("ascii")
    # Parameters in another order are the same query; a key given twice keeps the order of its values.
    pairs = parse_qsl(request.query_string.decode("latin-1"), keep_blank_values=True)
    query = sorted(pairs, key=lambda pair: pair[0])
    head = [FINGERPRINT_VERSION, request.method, request.path, query]
    digest = hashlib.sha256(json.dumps(head).encode("utf-8"))
    digest.update(body)
    return digest.hexdigest()


def _token(request: Any, header: str) -> tuple[str, str | None]:
    """The request's token, or why there is none that can be used."""
    token = (request.headers.get(header) or "").strip()
    if not token:
        return "", f"the {header} header is missing or empty: send the run's idempotency token in it"
    if "," in token:
        # Servers join a header sent twice into one value with commas: which token was meant is unknown.
        return "", (
            f"the {header} header holds a comma: it was sent more than once, or its token has one; "
            "send the header once, with a token without commas"
        )
    return token, None


class _InvalidAnswer(RunonceError):
    """The handler returned something Flask cannot send (None, a set, a dict it cannot encode...)."""


class _Request:
    """One request to an idempotent endpoint: the claim it holds and how it ends, on self."""

    def __init__(self, source: _StoreSource, scope: str, header: str, handler: Callable, request: Any):
        self.source = source
        self.scope = scope
        self.header = header
        self.handler = handler
        self.request = request
        self.fields: dict[str, Any] = {"endpoint": scope}
        self.store: Store | None = None
        self.claim: Claim | None = None
        self.answer: HttpAnswer | None = None
        """The handler's answer, read in full: once set, the handler has run to its end."""
        self.finished = False

    def handle(self) -> Any:
        try:
            return self._handle()
        except Exception as exc:
            return self._unexpected(exc)

    def _handle(self) -> Any:
        token, problem = _token(self.request, self.header)
        if problem is not None:
            log(
                logging.WARNING,
                f"rejected request: {problem}",
                outcome="rejected",
                header=self.header,
                **self.fields,
            )
            return EndpointOutcome.REJECTED.answer(error=problem)
        self.fields["token"] = clip(token, 128)
        if not flask.has_request_context():
            return self._misconfigured(
                "idempotent_endpoint needs a Flask request: serve it with functions-framework "
                "(@functions_framework.http) or call it from a Flask view"
            )
        try:
            store = self.source.get()
        except ConfigError as exc:
            return self._misconfigured(describe(exc))
        fingerprint = request_fingerprint(self.request)
        key = step_key(token, self.scope)
        try:
            claim = store.claim(key, {"step": self.scope, "token": token[:512], "fingerprint": fingerprint})
        except StoreError as exc:
            return self._store_failed(exc, "the claim")
        if isinstance(claim, Held):
            return self._held(store, claim, fingerprint)
        self.store, self.claim = store, claim
        if claim.attempt > 1:
            # A takeover: the record still names the request whose attempt's lease ran out.
            # Another request must not run in its place under the same token.
            try:
                differs = self._first_request_differs(store, key, fingerprint)
            except StoreError as exc:
                self._release()
                return self._store_failed(exc, "reading the first request's record")
            if differs:
                self._release()
                return self._mismatch()
        return self._run()

    def _run(self) -> Any:
        try:
            answer = self._answer()
        except _InvalidAnswer as exc:
            return self._invalid(describe(exc))
        except NotRunnable as exc:
            self._release()
            return self._misconfigured(describe(exc))
        except PermanentError as exc:
            return self._fail(describe(exc))
        except (SystemExit, KeyboardInterrupt):
            self._release()
            raise
        except Exception as exc:
            released = self._release()
            log(
                logging.ERROR,
                f"request failed, may be retried: {describe(exc)}",
                exc_info=True,
                outcome="retry",
                released=released,
                **self.fields,
            )
            return EndpointOutcome.RETRY.answer(error=type_name(exc))
        self.answer = answer
        if answer.status_code >= 500 or answer.status_code in RETRYABLE_4XX:
            released = self._release()
            log(
                logging.WARNING,
                f"handler answered HTTP {answer.status_code}; token released so a retry runs it",
                outcome="retry",
                released=released,
                **self.fields,
            )
            return answer.response()
        self._complete(answer.stored())
        return answer.response()

    def _answer(self) -> HttpAnswer:
        """Run the handler and read its answer in full, as Flask would send it."""
        try:
            returned = self.handler(self.request)
        except HTTPException as exc:  # flask.abort(404) and the like: an answer, by the status rule
            returned = flask.current_app.handle_http_exception(exc)
        if inspect.isawaitable(returned):
            getattr(returned, "close", lambda: None)()  # never started: no "never awaited" warning
            raise NotRunnable(f"the handler returned a {type_name(returned)}: make it a plain def")
        return HttpAnswer.of(_response(returned))

    def _held(self, store: Store, held: Held, fingerprint: str) -> Any:
        if held.status is RunStatus.IN_PROGRESS:
            log(logging.INFO, "repeated request while the first runs", outcome="in_progress", **self.fields)
            return EndpointOutcome.IN_PROGRESS.answer()
        try:
            differs = self._first_request_differs(store, held.key, fingerprint)
        except StoreError as exc:
            return self._store_failed(exc, "reading the first request's record")
        if differs:
            return self._mismatch()
        if held.status is RunStatus.FAILED:
            log(logging.INFO, "repeated request of a failed one", outcome="failed", **self.fields)
            return (*EndpointOutcome.FAILED.answer(error=held.error), {REPLAYED_HEADER: "true"})
        log(logging.INFO, "repeated request; replaying the stored answer", outcome="duplicate", **self.fields)
        return replay(held.stored)

    @staticmethod
    def _first_request_differs(store: Store, key: str, fingerprint: str) -> bool:
        """Whether the record was claimed for another request than this one (StoreError if unread)."""
        record = store.read(key) or {}
        return record.get("fingerprint", fingerprint) != fingerprint

    def _mismatch(self) -> Any:
        error = (
            f"this {self.header} was first used with another request (method, path, query or body): "
            "a token stands for one request; send a new token for a new request"
        )
        log(logging.WARNING, f"rejected request: {error}", outcome="payload_mismatch", **self.fields)
        return EndpointOutcome.PAYLOAD_MISMATCH.answer(error=error)

    def _complete(self, stored: Any) -> bool:
        """Record the answer; False (logged) if it could not be: the answer is sent all the same."""
        assert self.store is not None and self.claim is not None
        self.finished = True
        try:
            recorded = self.store.complete(self.claim, stored) is not None
            problem = None if recorded else "the request was taken over by another attempt"
        except Exception as exc:
            recorded, problem = False, _problem(exc)
        if problem is not None:
            log(
                logging.ERROR,
                f"request completed but not recorded ({problem}): a repeat after the lease runs it again",
                outcome="completed",
                recorded=False,
                **self.fields,
            )
        return recorded

    def _fail(self, error: str) -> Any:
        assert self.store is not None and self.claim is not None
        self.finished = True
        try:
            recorded = self.store.fail(self.claim, error)
        except Exception as exc:
            recorded, error = False, f"{error} (not recorded: {_problem(exc)})"
        log(
            logging.ERROR,
            f"request failed permanently: {error}",
            outcome="failed",
            recorded=recorded,
            **self.fields,
        )
        # Told only when false, so a recorded failure is answered the same first and to every repeat.
        return EndpointOutcome.FAILED.answer(error=error, **({} if recorded else {"recorded": False}))

    def _release(self) -> bool:
        """Give the token back so a retry runs the handler; False (logged) if that failed."""
        assert self.store is not None and self.claim is not None
        self.finished = True
        try:
            return self.store.release(self.claim)
        except Exception as exc:
            log(logging.ERROR, f"the release failed: {_problem(exc)}", outcome="retry", **self.fields)
            return False

    def _invalid(self, error: str) -> Any:
        """The handler ran, then returned what Flask cannot send: never run it again for this token."""
        error = f"the handler's answer cannot be sent ({error}); it ran, so repeats are not run again"
        self._complete(not_stored("500 INTERNAL SERVER ERROR", error))
        log(logging.ERROR, error, outcome="error", **self.fields)
        return EndpointOutcome.ERROR.answer(error=error)

    def _misconfigured(self, error: str) -> Any:
        log(
            logging.ERROR,
            f"idempotent endpoint misconfigured: {error}",
            outcome="misconfigured",
            **self.fields,
        )
        return EndpointOutcome.MISCONFIGURED.answer(error=error)

    def _store_failed(self, exc: StoreError, what: str) -> Any:
        if isinstance(exc, StoreDenied):
            return self._misconfigured(f"{what} failed: {exc.problem}")
        outcome = (
            EndpointOutcome.STORE_UNAVAILABLE if isinstance(exc, StoreUnavailable) else EndpointOutcome.ERROR
        )
        log(
            logging.ERROR,
            f"idempotency ledger failed: {what}: {exc.problem}",
            outcome=outcome.label,
            **self.fields,
        )
        return outcome.answer(error=f"{what} failed: {exc.problem}")

    def _unexpected(self, exc: Exception) -> Any:
        """The outer guard: answer JSON, and complete or give back a claim still held."""
        if self.claim is not None and not self.finished:
            if self.answer is not None:
                self._complete(
                    not_stored(self.answer.status, f"runonce failed before storing it ({type_name(exc)})")
                )
            else:
                self._release()
        log(
            logging.ERROR,
            f"idempotent endpoint failed unexpectedly: {describe(exc)}",
            exc_info=True,
            outcome="error",
            **self.fields,
        )
        return EndpointOutcome.ERROR.answer(error=type_name(exc))


def _problem(exc: Exception) -> str:
    return exc.problem if isinstance(exc, StoreError) else f"{type_name(exc)}: {describe(exc, 500)}"


def _response(returned: Any) -> Any:
    """The Response Flask makes of the handler's return value; _InvalidAnswer if it makes none."""
    try:
        return flask.current_app.make_response(returned)
    except (TypeError, ValueError) as exc:
        raise _InvalidAnswer(describe(exc, 1024)) from exc


def idempotent_endpoint(
    func: Callable | None = None,
    *,
    name: str | None = None,
    header: str = IDEMPOTENCY_HEADER,
    collection: str | None = None,
    lease: int | None = None,
    retention: int | None = None,
    database: str | None = None,
    client: firestore.Client | None = None,
):
    """Answer every request with one idempotency token exactly as its first run was answered.

    Place it under `@functions_framework.http` (or call the result from a Flask view). The handler
    returns anything Flask accepts. The library's status rule decides: 408, 429 and 5xx (an int or
    text status, or a `Response`'s) and any exception release the token so a retry runs the
    handler again; any other answer is stored and replayed to repeats of the same request (see
    `replay`); PermanentError is stored as a failure and answered 422. The same token with another
    method, path, query or body is refused 422 (`request_fingerprint`). `name` (default: the
    function's name) scopes the token, so two endpoints may receive the same token.
    """
    if not isinstance(header, str) or not _HEADER_NAME.fullmatch(header):
        raise ConfigError(
            f"header={clip(repr(header), 80)} is not a header name a request can carry: use letters, "
            f"digits and hyphens (servers drop names with underscores), e.g. {IDEMPOTENCY_HEADER}"
        )
    steps = Steps(collection=collection, lease=lease, retention=retention, database=database, client=client)

    def decorate(handler: Callable) -> Callable:
        call = getattr(type(handler), "__call__", None)  # noqa: B004 - an instance's async __call__
        if inspect.iscoroutinefunction(handler) or inspect.iscoroutinefunction(call):
            raise NotRunnable(
                f"idempotent_endpoint cannot run {type_name(handler)} {getattr(handler, '__name__', '')}: it "
                "is an async function, so calling it only creates a coroutine; make it a plain def"
            )
        scope = name or getattr(handler, "__name__", None) or type_name(handler)

        @functools.wraps(handler)
        def endpoint(request: Any):
            return _Request(steps._source, scope, header, handler, request).handle()

        return endpoint

    return decorate(func) if func is not None else decorate
