"""The team's watchdog: each tick, one ERROR line per scheduled run past its grace that did not
finish, each run reported once, and a missed run within its job's catch-up window started once
instead (runonce.scheduler.watchdog; docs/watchdog.md, docs/schedules/backfill.md).

Its tick is a Cloud Scheduler delivery like any job's, so `@deduplicated` runs it once per tick in
the watchdog's own ledger (RUNONCE_DATABASE), where its claims of the reported runs live too; with
RUNONCE_STORE naming a Valkey server, its records and the team's are both there, under their
collections' names. The team's ledger is read, and written only by a catch-up (its request in a
job's re-run slot); Cloud Scheduler is called only for a job with a catch-up window (`jobs.run`)
or `pause_after_failures` (`jobs.get`, `jobs.pause`), with the function's own credentials, or with
none at RUNONCE_SCHEDULER_BASE_URL (a local stand-in).
"""

import functools
import os
from datetime import datetime

import functions_framework

from runonce import ConfigError, PermanentError, deduplicated
from runonce._instant import parse_instant
from runonce.contract import COLLECTION_VARIABLE, STORE_VARIABLE, WATCHDOG_LEDGER_COLLECTION_VARIABLE
from runonce.core.settings import FIRESTORE, load_settings
from runonce.core.store import Store
from runonce.scheduler.watchdog import Scheduler, Watch, check, watch_settings
from runonce.store.connection import open_store

SCHEDULER_API = "https://cloudscheduler.googleapis.com"
SCHEDULER_URL_VARIABLE = "RUNONCE_SCHEDULER_BASE_URL"
TIMEOUT_SECONDS = 30


class SchedulerApi:
    """Cloud Scheduler's REST API v1: `POST /v1/{name}:run` (jobs.run), `POST /v1/{name}:pause`
    (jobs.pause), `GET /v1/{name}` (jobs.get)."""

    def __init__(self, base_url: str):
        self._base_url = base_url.rstrip("/")

    @functools.cached_property
    def _session(self):
        import google.auth
        from google.auth.credentials import AnonymousCredentials
        from google.auth.transport.requests import AuthorizedSession

        if self._base_url != SCHEDULER_API:
            return AuthorizedSession(AnonymousCredentials())
        credentials, _ = google.auth.default(scopes=["https://www.googleapis.com/auth/cloud-platform"])
        return AuthorizedSession(credentials)

    def run(self, job: str) -> None:
        """Run the job now."""
        self._session.post(f"{self._base_url}/v1/{job}:run", timeout=TIMEOUT_SECONDS).raise_for_status()

    def pause(self, job: str) -> None:
        """Pause the job."""
        self._session.post(f"{self._base_url}/v1/{job}:pause", timeout=TIMEOUT_SECONDS).raise_for_status()

    def paused_since(self, job: str) -> datetime | None:
        """When the job was paused (its `userUpdateTime` while its `state` is PAUSED), or None."""
        answer = self._session.get(f"{self._base_url}/v1/{job}", timeout=TIMEOUT_SECONDS)
        answer.raise_for_status()
        body = answer.json()
        if body.get("state") != "PAUSED":
            return None
        return parse_instant(body["userUpdateTime"]).utc


@functools.cache
def _setup() -> tuple[Watch, Store, Store, Scheduler | None]:
    """The watch, the team's ledger, the watchdog's own store and (for a team with a catch-up
    window or a job it may pause) Cloud Scheduler, built once per instance (a ConfigError is not
    kept: the next tick reads the settings again). Both stores are on the store RUNONCE_STORE
    names: on Firestore in their two databases, on a Valkey server under their two collections'
    names."""
    settings = load_settings({})
    watching = watch_settings(os.environ)
    if settings.store != FIRESTORE and watching.ledger_collection == settings.collection:
        raise ConfigError(
            f"the team's ledger ({WATCHDOG_LEDGER_COLLECTION_VARIABLE}) and the watchdog's own store "
            f"({COLLECTION_VARIABLE}) are both {settings.collection!r} on the Valkey server "
            f"{STORE_VARIABLE} names: give the watchdog's own store another name"
        )
    lease, retention = settings.lease, settings.retention
    ledger = open_store(
        settings.store,
        watching.ledger_collection,
        lease,
        retention,
        watching.ledger_database,
        settings.project,
    )
    own = open_store(
        settings.store, settings.collection, lease, retention, settings.database, settings.project
    )
    catching = any(job.catch_up or job.pause_after_failures for job in watching.watch.jobs)
    return (
        watching.watch,
        ledger,
        own,
        SchedulerApi(os.environ.get(SCHEDULER_URL_VARIABLE) or SCHEDULER_API) if catching else None,
    )


@functions_framework.http
@deduplicated
def handle(request):
    """One tick: check every watched job; a setting the stack wrote wrong fails the tick for good,
    loudly, until it is redeployed."""
    try:
        watch, ledger, claims, scheduler = _setup()
    except ConfigError as exc:
        raise PermanentError(str(exc)) from exc
    return check(watch, ledger, claims, scheduler=scheduler)
