"""Downstream idempotency: a service the run calls checks the token before every state-changing step.

The proxy (or any runonce job) passes the run key on as an idempotency token. The service that
changes state deduplicates on it with the same ledger the scheduled runs use:

- `idempotent_endpoint`: an HTTP handler decorator keyed by the `X-Runonce-Idempotency-Key`
  header. The first request runs the handler and stores its answer; a repeat gets the stored
  answer back (with `X-Runonce-Replayed: true`) without running it; a repeat while the first
  still runs is answered 409.
- `Steps.run(token, name, action)`: runs one state-changing step once per token; a repeat returns
  the stored result.

One record per (step or endpoint name, token), named by a hash of both, so one token can guard
many steps and tokens of any shape make valid document ids. The guarantee is the ledger's: a
step whose process dies after the effect and before its record is written runs again once its
lease expires, so an effect that must never repeat belongs in the same store, written atomically
with its own check, or must be idempotent itself.
"""

from __future__ import annotations

import functools
import hashlib
import json
import logging
import os
import threading
from collections.abc import Callable
from typing import Any

from google.api_core import exceptions as gexc
from google.cloud import firestore

from .errors import PermanentError
from .ledger import Held, Ledger, RunStatus
from .logs import log
from .settings import load_settings
from .targets import IDEMPOTENCY_HEADER

DEFAULT_COLLECTION = "runonce_downstream"
COLLECTION_VARIABLE = "RUNONCE_DOWNSTREAM_COLLECTION"
REPLAYED_HEADER = "X-Runonce-Replayed"
# Bump only with a migration: stored step records are found by keys of this version.
STEP_KEY_VERSION = "runonce/step/v1"


class StepInProgress(Exception):
    """Another attempt holds this step's claim and its lease is live: try again later."""


def step_key(token: str, name: str) -> str:
    """The record id of step `name` for idempotency token `token`."""
    encoded = json.dumps([STEP_KEY_VERSION, name, token], separators=(",", ":")).encode("utf-8")
    return hashlib.sha256(encoded).hexdigest()


class _LedgerSource:
    """Settings and a ledger, built on first use: RUNONCE_* variables as for `@deduplicated`, but
    the collection is RUNONCE_DOWNSTREAM_COLLECTION (default runonce_downstream), apart from runs."""

    def __init__(self, options: dict[str, Any], client: firestore.Client | None):
        self._options = options
        self._client = client
        self._lock = threading.Lock()
        self._ledger: Ledger | None = None

    def get(self) -> Ledger:
        with self._lock:
            if self._ledger is None:
                collection = os.environ.get(COLLECTION_VARIABLE, DEFAULT_COLLECTION)
                settings = load_settings({"collection": collection, **self._options})
                client = self._client or firestore.Client(
                    project=settings.project, database=settings.database
                )
                self._ledger = Ledger(client, settings.collection, settings.lease, settings.retention)
            return self._ledger


class Steps:
    """Run state-changing steps once per idempotency token, on a run ledger.

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
        self._source = _LedgerSource({k: v for k, v in options.items() if v is not None}, client)

    @property
    def ledger(self) -> Ledger:
        """The ledger the steps are recorded in."""
        return self._source.get()

    def run(self, token: str, name: str, action: Callable[[], Any]) -> Any:
        """Run `action` unless step `name` already ran for `token`; its (stored) JSON-like result.

        A repeat of a finished step returns the stored result (None if it was not JSON-like).
        Raises StepInProgress while another attempt holds the step, PermanentError (again) for a
        step that failed permanently; any other exception from `action` releases the step so the
        next try runs it.
        """
        ledger = self.ledger
        claim = ledger.claim(step_key(token, name), {"step": name, "token": token[:512]})
        if isinstance(claim, Held):
            if claim.status is RunStatus.COMPLETED:
                return claim.result
            if claim.status is RunStatus.FAILED:
                raise PermanentError(claim.error or f"step {name} failed earlier")
            raise StepInProgress(f"step {name} is running elsewhere for this token")
        try:
            result = action()
        except PermanentError as exc:
            ledger.fail(claim, str(exc))
            raise
        except Exception:
            ledger.release(claim)
            raise
        ledger.complete(claim, result)
        return result


def _split(answer: Any) -> tuple[Any, int]:
    if isinstance(answer, tuple):
        body, status = answer[0], int(answer[1])
        return body, status
    return answer, 200


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

    Place it under `@functions_framework.http` (or call the result with a Flask request). The
    handler returns a JSON-like body or `(body, status)`. A 2xx or 4xx answer is stored and
    replayed; a 5xx answer or an exception releases the token so a retry runs the handler again;
    PermanentError is stored as a failure and answered 422. `name` (default: the function's name)
    scopes the token, so two endpoints may receive the same token.
    """
    steps = Steps(collection=collection, lease=lease, retention=retention, database=database, client=client)

    def decorate(handler: Callable) -> Callable:
        scope = name or handler.__name__

        @functools.wraps(handler)
        def endpoint(request: Any):
            token = request.headers.get(header)
            if not token:
                return {"outcome": "rejected", "error": f"the {header} header is missing"}, 400
            fields = {"endpoint": scope, "token": token[:128]}
            try:
                ledger = steps.ledger
                claim = ledger.claim(step_key(token, scope), {"step": scope, "token": token[:512]})
            except (gexc.GoogleAPICallError, gexc.RetryError) as exc:
                log(
                    logging.ERROR,
                    f"idempotency ledger unavailable: {exc}",
                    outcome="store_unavailable",
                    **fields,
                )
                return {"outcome": "store_unavailable"}, 500
            if isinstance(claim, Held):
                return _held(claim, fields)
            try:
                body, status = _split(handler(request))
            except PermanentError as exc:
                ledger.fail(claim, str(exc))
                log(logging.ERROR, f"request failed permanently: {exc}", outcome="failed", **fields)
                return {"outcome": "failed", "error": str(exc)}, 422
            except Exception as exc:
                ledger.release(claim)
                log(
                    logging.ERROR,
                    f"request failed, may be retried: {exc!r}",
                    exc_info=True,
                    outcome="retry",
                    **fields,
                )
                return {"outcome": "retry", "error": type(exc).__name__}, 500
            if status >= 500:
                ledger.release(claim)
            else:
                ledger.complete(claim, {"status": status, "body": body})
            return body, status

        return endpoint

    return decorate(func) if func is not None else decorate


def _held(held: Held, fields: dict[str, Any]):
    if held.status is RunStatus.COMPLETED:
        stored = held.result or {}
        log(logging.INFO, "repeated request; replaying the stored answer", outcome="duplicate", **fields)
        return stored.get("body"), int(stored.get("status", 200)), {REPLAYED_HEADER: "true"}
    if held.status is RunStatus.FAILED:
        return {"outcome": "failed", "error": held.error}, 422, {REPLAYED_HEADER: "true"}
    return {"outcome": "in_progress"}, 409
