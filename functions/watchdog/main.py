"""The team's watchdog: each tick, one ERROR line per scheduled run past its grace that did not
finish, each run reported once (runonce.scheduler.watchdog; docs/watchdog.md).

Its tick is a Cloud Scheduler delivery like any job's, so `@deduplicated` runs it once per tick in
the watchdog's own ledger (RUNONCE_DATABASE), where its claims of the reported runs live too. The
team's ledger is read only: the watchdog's account may read that database and nothing more.
"""

import functools
import os

import functions_framework
from google.cloud import firestore

from runonce import ConfigError, PermanentError, deduplicated
from runonce.core.settings import load_settings
from runonce.core.store import Store
from runonce.scheduler.watchdog import Watch, check, watch_settings
from runonce.store.firestore import Ledger, LedgerStore


@functools.cache
def _setup() -> tuple[Watch, Store, Store]:
    """The watch, the team's ledger and the watchdog's own store, built once per instance (a
    ConfigError is not kept: the next tick reads the settings again)."""
    settings = load_settings({})
    watching = watch_settings(os.environ)
    ledger = firestore.Client(project=settings.project, database=watching.ledger_database)
    own = firestore.Client(project=settings.project, database=settings.database)
    return (
        watching.watch,
        LedgerStore(Ledger(ledger, watching.ledger_collection, settings.lease, settings.retention)),
        LedgerStore(Ledger(own, settings.collection, settings.lease, settings.retention)),
    )


@functions_framework.http
@deduplicated
def handle(request):
    """One tick: check every watched job; a setting the stack wrote wrong fails the tick for good,
    loudly, until it is redeployed."""
    try:
        watch, ledger, claims = _setup()
    except ConfigError as exc:
        raise PermanentError(str(exc)) from exc
    return check(watch, ledger, claims)
