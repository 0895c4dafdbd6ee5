"""The idempotent proxy: the job body that starts a Google API target once per run.

Put under `@deduplicated` (functions/proxy/main.py does), it runs only for the attempt that
holds the run's claim. It first looks for what an earlier attempt of the same run may already
have started (by the label or substitution carrying the run key), records that if found, and
otherwise starts the target with the run key as the idempotency token. The result stored with
the run names the execution, operation or build, so duplicates are answered with it.

Every answer is read by Google's canonical error code (`error.status` of the JSON error body,
AIP-193), not by its HTTP class, and falls in one of four cases (`Verdict`, docs/targets.md has
the table): the call was refused (PermanentError: recorded failed, never retried), it was not
done (TargetUnavailable: the claim is released and Scheduler retries at once; on attempt 2 and
later the run is held instead, as below), it may have
taken effect (looked for at once; if not found, OutcomeUnknown: the run stays held for the
grace, after which a retry looks again and only then starts), or the resource already exists.
A 2xx always means started: an answer that cannot be read is looked up, never started again.
"""

from __future__ import annotations

import json
import logging
import os
import threading
import time
from collections.abc import Mapping
from enum import Enum
from typing import Any
from urllib.parse import urlsplit

import google.auth.exceptions
import requests
from urllib3.exceptions import HTTPError, MaxRetryError, NewConnectionError

from .._logs import log
from ..core.errors import ConfigError, OutcomeUnknown, PermanentError, RunonceError
from ..core.run import current_run
from .schema import (
    BASE_URL_VARIABLE,
    DEFAULT_TIMEOUT_SECONDS,
    GRACE_MARGIN_SECONDS,
    GRACE_VARIABLE,
    TIMEOUT_VARIABLE,
    Call,
    GoogleApi,
    Target,
    Unreadable,
    load_target,
)

SCOPES = ("https://www.googleapis.com/auth/cloud-platform",)


class Verdict(Enum):
    """What an answer other than 2xx says about the call that got it."""

    REFUSED = "refused"
    """Not done, and the same call will be refused again: a permanent failure."""
    NOT_DONE = "not_done"
    """Not done; the same call may work later: retry now."""
    UNKNOWN = "unknown"
    """It may have taken effect (lost answer, timeout, internal error): look before repeating."""
    EXISTS = "exists"
    """ALREADY_EXISTS: what the call creates is there."""
    GONE = "gone"
    """NOT_FOUND to a DELETE: what the call removes is not there (AIP-135)."""


# google.rpc.Code names as `error.status` carries them, read with AIP-194's retry guidance.
CANONICAL = {
    "INVALID_ARGUMENT": Verdict.REFUSED,
    "FAILED_PRECONDITION": Verdict.REFUSED,
    "OUT_OF_RANGE": Verdict.REFUSED,
    "UNAUTHENTICATED": Verdict.REFUSED,
    "PERMISSION_DENIED": Verdict.REFUSED,
    "NOT_FOUND": Verdict.REFUSED,
    "UNIMPLEMENTED": Verdict.REFUSED,
    "ALREADY_EXISTS": Verdict.EXISTS,
    "ABORTED": Verdict.NOT_DONE,
    "RESOURCE_EXHAUSTED": Verdict.NOT_DONE,
    "UNAVAILABLE": Verdict.UNKNOWN,
    "DEADLINE_EXCEEDED": Verdict.UNKNOWN,
    "INTERNAL": Verdict.UNKNOWN,
    "UNKNOWN": Verdict.UNKNOWN,
    "DATA_LOSS": Verdict.UNKNOWN,
    "CANCELLED": Verdict.UNKNOWN,
}


def verdict_of(status: int, body: Any, method: str) -> Verdict:
    """The verdict of an HTTP `status` other than 2xx to a `method` call, with its decoded JSON
    `body` (None if not JSON)."""
    error = body.get("error") if isinstance(body, dict) else None
    code = error.get("status") if isinstance(error, dict) else None
    if code == "NOT_FOUND" and method == "DELETE":
        return Verdict.GONE
    if isinstance(code, str) and code in CANONICAL:
        return CANONICAL[code]
    # Not Google's error body (a front end's HTML, an empty body): only the HTTP status is left.
    if status in (408, 429):
        return Verdict.NOT_DONE
    if status == 409 or (status >= 500 and status != 501):
        return Verdict.UNKNOWN  # 409 is ABORTED or ALREADY_EXISTS; a 5xx may follow a commit
    return Verdict.REFUSED  # 3xx (Google APIs do not redirect), 501 and the other 4xx


class TargetUnavailable(RunonceError):
    """The target did not do the call, or the proxy cannot tell: `verdict` says which."""

    def __init__(self, message: str, verdict: Verdict):
        super().__init__(message)
        self.verdict = verdict


def _error_message(content: bytes, body: Any) -> str:
    error = body.get("error") if isinstance(body, dict) else None
    if isinstance(error, dict) and "message" in error:
        return f"{error.get('status', '')} {error['message']}".strip()
    return content[:500].decode("utf-8", "replace") or "(empty body)"


def _body(response: requests.Response, deadline: float) -> bytes:
    """The answer's body as it arrives, until `deadline` (monotonic): `timeout` bounds each read
    of the socket, not the whole answer, and a body that trickles in would otherwise keep the
    attempt waiting until its instance is stopped."""
    chunks = []
    while chunk := response.raw.read1(65536, decode_content=True):
        chunks.append(chunk)
        if time.monotonic() > deadline:
            response.close()
            raise TimeoutError("the body was still arriving at the timeout")
    return b"".join(chunks)


def _never_connected(exc: requests.ConnectionError) -> bool:
    """Whether the connection was never made (refused, no such host): nothing was sent."""
    reason = exc.args[0] if exc.args else None
    return isinstance(reason, MaxRetryError) and isinstance(reason.reason, NewConnectionError)


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
    (RUNONCE_TARGET_TIMEOUT_SECONDS) and the grace a start of unknown outcome is held for
    (RUNONCE_TARGET_GRACE_SECONDS, default: the timeout plus 60 s). Calls carry the proxy's own
    account's token: from `credentials` if given (tests inject fakes), else google.auth.default().
    """

    def __init__(
        self,
        target: Target | None = None,
        *,
        credentials: Any = None,
        base_url: str | None = None,
        timeout: float | None = None,
        grace: float | None = None,
        environ: Mapping[str, str] | None = None,
    ):
        self._target = target
        self._credentials = credentials
        self._base_url = base_url
        self._timeout = timeout
        self._grace = grace
        self._environ = environ
        self._session: requests.Session | None = None
        self._lock = threading.Lock()

    def __call__(self, request: Any) -> dict[str, Any]:
        """The job body: start (or find) this run's target; the request itself is not used."""
        run = current_run()
        return self.start(run.key, attempt=run.attempt)

    def start(self, key: str, attempt: int = 1) -> dict[str, Any]:
        """Find what an earlier attempt of run `key` started, else start it now; the run's result.

        Attempt 2 and later took over a run whose earlier attempt may have started the target
        (it died after the call, or its start's outcome was unknown and the run was held): such a
        run is never released again, only held, so that knowledge is not lost with the claim.
        """
        target, session = self._resolve()
        earlier = attempt > 1  # an earlier attempt may have started it
        try:
            existing = self._find(session, target, key)
        except TargetUnavailable as exc:
            if earlier:
                raise self._held(f"could not look for an earlier start ({exc})") from exc
            raise
        if existing is not None:
            return _reconciled(target, key, attempt, existing, "started by an earlier attempt")
        try:
            started = target.started(self._send(session, target.start(key)))
        except TargetUnavailable as exc:
            return self._after_failed_start(target, session, key, attempt, exc)
        except Unreadable as exc:
            return self._after_unreadable_start(target, session, key, attempt, str(exc))
        return {"target": target.kind, **started, "reconciled": False}

    def _after_failed_start(
        self, target: Target, session: requests.Session, key: str, attempt: int, exc: TargetUnavailable
    ) -> dict[str, Any]:
        if exc.verdict in (Verdict.EXISTS, Verdict.GONE) and isinstance(target, GoogleApi):
            existed = exc.verdict is Verdict.EXISTS
            if attempt > 1:  # an earlier attempt's call, whose answer was lost, did it
                found = {"name": None, "already_existed" if existed else "already_gone": True}
                return _reconciled(target, key, attempt, found, str(exc))
            was = "existed" if existed else "was gone"
            raise PermanentError(f"{exc}: it {was} before this run's first call")
        if exc.verdict is Verdict.NOT_DONE:
            if attempt > 1:
                raise self._held(str(exc)) from exc
            raise exc
        existing = self._find_quietly(session, target, key)
        if existing is not None:
            return _reconciled(target, key, attempt, existing, f"started, but the answer was lost ({exc})")
        raise self._held(f"the start's outcome is unknown ({exc})") from exc

    def _after_unreadable_start(
        self, target: Target, session: requests.Session, key: str, attempt: int, why: str
    ) -> dict[str, Any]:
        """A 2xx is the API's word that it started the target: never start it again."""
        existing = self._find_quietly(session, target, key)
        if existing is not None:
            return _reconciled(target, key, attempt, existing, f"started, but its answer {why}")
        log(
            logging.ERROR,
            f"target started, but its answer {why}; recording the run without its name",
            run_key=key,
            attempt=attempt,
            target=target.kind,
        )
        return {"target": target.kind, "reconciled": False, "answer_unreadable": why}

    def _held(self, why: str) -> OutcomeUnknown:
        assert self._grace is not None
        return OutcomeUnknown(f"{why}; held {self._grace:g} s before looking again", self._grace)

    def _resolve(self) -> tuple[Target, requests.Session]:
        with self._lock:
            environ = os.environ if self._environ is None else self._environ
            if self._target is None:
                self._target = load_target(environ)
            if self._base_url is None:
                self._base_url = environ.get(BASE_URL_VARIABLE, "").rstrip("/")
            if self._timeout is None:
                self._timeout = _seconds(environ, TIMEOUT_VARIABLE, DEFAULT_TIMEOUT_SECONDS)
            if self._grace is None:
                self._grace = _seconds(environ, GRACE_VARIABLE, self._timeout + GRACE_MARGIN_SECONDS)
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
        try:
            return target.found(self._send(session, lookup), key)
        except Unreadable as exc:  # a listing that cannot be read cannot say "not started"
            where = f"{lookup.method} {self._url(lookup)}"
            raise TargetUnavailable(f"{where}: the listing {exc}", Verdict.UNKNOWN) from exc

    def _find_quietly(self, session: requests.Session, target: Target, key: str) -> dict[str, Any] | None:
        """A second look after an unknown outcome; its own failure leaves the run to be held."""
        try:
            return self._find(session, target, key)
        except (TargetUnavailable, PermanentError):
            return None

    def _send(self, session: requests.Session, call: Call) -> Any:
        """The decoded JSON of a 2xx answer ({} for an empty one); Unreadable for a 2xx whose body
        is cut off or not JSON; TargetUnavailable or PermanentError for any other answer."""
        url = self._url(call)
        where = f"{call.method} {url}"
        timeout = self._timeout
        assert timeout is not None  # set by _resolve
        began = time.monotonic()
        try:
            response = session.request(
                call.method,
                url,
                params=call.params or None,
                json=call.body,
                headers=call.headers or None,
                timeout=timeout,
                allow_redirects=False,
                stream=True,  # the status first: a body lost after a 2xx is not a lost start
            )
        except requests.ConnectTimeout as exc:
            raise TargetUnavailable(f"{where}: connect timeout: {exc}", Verdict.NOT_DONE) from exc
        except requests.Timeout as exc:
            raise TargetUnavailable(f"{where}: no answer in time: {exc}", Verdict.UNKNOWN) from exc
        except requests.ConnectionError as exc:
            verdict = Verdict.NOT_DONE if _never_connected(exc) else Verdict.UNKNOWN
            raise TargetUnavailable(f"{where}: connection failed: {exc}", verdict) from exc
        except requests.RequestException as exc:
            raise TargetUnavailable(f"{where}: {exc}", Verdict.UNKNOWN) from exc
        except google.auth.exceptions.GoogleAuthError as exc:
            # No token could be minted: the call was not sent (or got 401, which is not done).
            raise TargetUnavailable(f"{where}: no access token: {exc}", Verdict.NOT_DONE) from exc
        status = response.status_code
        try:
            content = _body(response, began + timeout)
        except (HTTPError, OSError) as exc:  # cut off, reset, or still arriving at the timeout
            if 200 <= status < 300:
                raise Unreadable(f"was cut off ({type(exc).__name__}: {exc})") from exc
            raise TargetUnavailable(f"{where} answered {status}, cut off: {exc}", Verdict.UNKNOWN) from exc
        try:
            body = json.loads(content) if content else None
        except ValueError:
            body = None
        if 200 <= status < 300:
            if not content:
                return {}
            if body is None:
                raise Unreadable(f"is not JSON ({content[:80]!r})")
            return body
        message = f"{where} answered {status}: {_error_message(content, body)}"
        verdict = verdict_of(status, body, call.method)
        if verdict is Verdict.REFUSED:
            raise PermanentError(message)
        raise TargetUnavailable(message, verdict)


def _seconds(environ: Mapping[str, str], variable: str, default: float) -> float:
    raw = environ.get(variable)
    if raw is None:
        return float(default)
    try:
        value = float(raw)
    except ValueError:
        raise ConfigError(f"{variable}={raw!r} is not a number of seconds") from None
    if not value > 0:
        raise ConfigError(f"{variable}={raw!r} must be more than 0 seconds")
    return value
