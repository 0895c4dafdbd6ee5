"""The idempotent proxy: the job body that starts a Google API target once per run.

Put under `@deduplicated` (functions/proxy/main.py does), it runs only for the attempt that
holds the run's claim. It first looks for what an earlier attempt of the same run may already
have started (by the label or substitution carrying the run key), records that if found, and
otherwise starts the target with the run key as the idempotency token. The result stored with
the run names the execution, operation or build, so duplicates are answered with it.

Target answers map onto runonce's outcomes: a 4xx other than 408/429 raises PermanentError
(recorded, never retried); 408, 429, 5xx, timeouts and connection errors raise TargetUnavailable,
an ordinary exception, so the claim is released and Scheduler retries.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Mapping
from typing import Any
from urllib.parse import urlsplit

import requests

from .errors import ConfigError, PermanentError
from .logs import log
from .run import current_run
from .targets import BASE_URL_VARIABLE, TIMEOUT_VARIABLE, Call, Target, load_target

SCOPES = ("https://www.googleapis.com/auth/cloud-platform",)
DEFAULT_TIMEOUT_SECONDS = 30.0
# Answers a later try may change; every other 4xx is the request's own fault.
RETRYABLE_4XX = {408, 429}


class TargetUnavailable(Exception):
    """The target could not give an answer now (408, 429, 5xx, timeout, connection error): retry.

    `maybe_started` says whether the call may have reached the target and done its work anyway
    (its answer was lost, or it failed after committing): then the proxy looks before giving up.
    """

    def __init__(self, message: str, maybe_started: bool):
        super().__init__(message)
        self.maybe_started = maybe_started


def _error_message(response: requests.Response) -> str:
    try:
        return str(response.json()["error"]["message"])
    except (ValueError, KeyError, TypeError):
        return response.text[:500]


def _reconciled(target: Target, key: str, attempt: int, existing: dict[str, Any], why: str) -> dict[str, Any]:
    """The result for a target found instead of started, logged so operators see it happen."""
    log(
        logging.WARNING,
        f"target {why}; recording it",
        run_key=key,
        attempt=attempt,
        target=target.kind,
        **existing,
    )
    return {"target": target.kind, **existing, "reconciled": True}


class Proxy:
    """Start one target per run. Call it as a `@deduplicated` job body, or `start(key)` directly.

    Everything is read from the environment on first use unless given: the target
    (RUNONCE_TARGET), the base URL replacing the target's googleapis.com host
    (RUNONCE_TARGET_BASE_URL, for a local stand-in), the per-call timeout
    (RUNONCE_TARGET_TIMEOUT_SECONDS). Calls carry the proxy's own account's token: from
    `credentials` if given (tests inject fakes), else from google.auth.default().
    """

    def __init__(
        self,
        target: Target | None = None,
        *,
        credentials: Any = None,
        base_url: str | None = None,
        timeout: float | None = None,
        environ: Mapping[str, str] | None = None,
    ):
        self._target = target
        self._credentials = credentials
        self._base_url = base_url
        self._timeout = timeout
        self._environ = environ
        self._session: requests.Session | None = None
        self._lock = threading.Lock()

    def __call__(self, request: Any) -> dict[str, Any]:
        """The job body: start (or find) this run's target; the request itself is not used."""
        run = current_run()
        return self.start(run.key, attempt=run.attempt)

    def start(self, key: str, attempt: int = 1) -> dict[str, Any]:
        """Find what an earlier attempt of run `key` started, else start it now; the run's result."""
        target, session = self._resolve()
        existing = self._find(session, target, key)
        if existing is not None:
            return _reconciled(target, key, attempt, existing, "started by an earlier attempt")
        try:
            answer = self._send(session, target.start(key))
        except TargetUnavailable as exc:
            existing = self._find_quietly(session, target, key) if exc.maybe_started else None
            if existing is not None:
                return _reconciled(
                    target, key, attempt, existing, f"started, but the answer was lost ({exc})"
                )
            raise
        return {"target": target.kind, **target.started(answer), "reconciled": False}

    def _resolve(self) -> tuple[Target, requests.Session]:
        with self._lock:
            environ = os.environ if self._environ is None else self._environ
            if self._target is None:
                self._target = load_target(environ)
            if self._base_url is None:
                self._base_url = environ.get(BASE_URL_VARIABLE, "").rstrip("/")
            if self._timeout is None:
                raw = environ.get(TIMEOUT_VARIABLE, str(DEFAULT_TIMEOUT_SECONDS))
                try:
                    self._timeout = float(raw)
                except ValueError:
                    raise ConfigError(f"{TIMEOUT_VARIABLE}={raw!r} is not a number of seconds") from None
            if self._session is None:
                self._session = self._authorized_session()
            return self._target, self._session

    def _authorized_session(self) -> requests.Session:
        # Imported here: google.auth.transport.requests is needed only when a target is called.
        import google.auth
        from google.auth.transport.requests import AuthorizedSession

        credentials = self._credentials
        if credentials is None:
            credentials, _ = google.auth.default(scopes=list(SCOPES))
        return AuthorizedSession(credentials)

    def _url(self, call: Call) -> str:
        if not self._base_url:
            return call.url
        parts = urlsplit(call.url)
        return self._base_url + parts.path + (f"?{parts.query}" if parts.query else "")

    def _find(self, session: requests.Session, target: Target, key: str) -> dict[str, Any] | None:
        lookup = target.lookup(key)
        if lookup is None:
            return None
        return target.found(self._send(session, lookup), key)

    def _find_quietly(self, session: requests.Session, target: Target, key: str) -> dict[str, Any] | None:
        """A second look after a lost answer; its own failure leaves the first error to be raised."""
        try:
            return self._find(session, target, key)
        except (TargetUnavailable, PermanentError):
            return None

    def _send(self, session: requests.Session, call: Call) -> dict[str, Any]:
        url = self._url(call)
        try:
            response = session.request(
                call.method,
                url,
                params=call.params or None,
                json=call.body,
                headers=call.headers or None,
                timeout=self._timeout,
            )
        except requests.ConnectTimeout as exc:
            raise TargetUnavailable(
                f"{call.method} {url}: connect timeout: {exc}", maybe_started=False
            ) from exc
        except requests.Timeout as exc:
            raise TargetUnavailable(
                f"{call.method} {url}: no answer in time: {exc}", maybe_started=True
            ) from exc
        except requests.ConnectionError as exc:
            # Refused before sending, or dropped after: the call may have landed.
            raise TargetUnavailable(
                f"{call.method} {url}: connection failed: {exc}", maybe_started=True
            ) from exc
        status = response.status_code
        if 200 <= status < 300:
            try:
                answer = response.json() if response.content else {}
            except ValueError:
                answer = {}
            return answer if isinstance(answer, dict) else {"answer": answer}
        message = f"{call.method} {url} answered {status}: {_error_message(response)}"
        if 400 <= status < 500 and status not in RETRYABLE_4XX:
            raise PermanentError(message)
        raise TargetUnavailable(message, maybe_started=status >= 500)
