"""The settings, Firestore client and run store of one decorated function, built at first use:
the Firestore ledger, or the Valkey store its `store` setting names (loaded only then).

Built lazily, so importing a module never fails or touches the network. Whatever stops them being
built (an invalid setting, no project, no credentials) becomes a ConfigError naming what to set;
it is answered `misconfigured` and tried again at the next request, until it is fixed.
"""

from __future__ import annotations

import os
import threading
from datetime import timedelta
from typing import Any, NamedTuple

from google.auth import exceptions as auth_exceptions
from google.cloud import firestore

from .._text import describe
from ..contract import STORE_CA_VARIABLE
from ..core.errors import ConfigError
from ..core.settings import DEFAULT_DATABASE, FIRESTORE, Settings, load_settings
from ..core.store import Store
from .firestore import Ledger, LedgerStore


class Setup(NamedTuple):
    """What a request needs: the settings, the store, and the project (for trace ids in logs)."""

    settings: Settings
    store: Store
    project: str | None


class Connection:
    """Builds the settings and store on first use and keeps them for the process."""

    def __init__(self, overrides: dict[str, Any], client: firestore.Client | None):
        self._overrides = overrides
        self._client = client
        self._lock = threading.Lock()
        self._setup: Setup | None = None

    def get(self) -> Setup:
        """The setup; ConfigError if it cannot be built (nothing is kept, the next call tries again)."""
        setup = self._setup
        if setup is not None:
            return setup
        with self._lock:
            if self._setup is None:
                self._setup = self._built(load_settings(self._overrides))
            return self._setup

    def _built(self, settings: Settings) -> Setup:
        if settings.store == FIRESTORE:
            client = self._client or _client(settings.project, settings.database)
            ledger = Ledger(client, settings.collection, settings.lease, settings.retention)
            return Setup(settings, LedgerStore(ledger), getattr(client, "project", None))
        if self._client is not None:
            raise ConfigError(
                "the decorator was given a Firestore client (client=) but the run store is a Valkey "
                "server (store= or RUNONCE_STORE): drop one of them"
            )
        store = open_store(settings.store, settings.collection, settings.lease, settings.retention)
        return Setup(settings, store, settings.project)


def open_store(
    store: str,
    collection: str,
    lease: timedelta,
    retention: timedelta,
    database: str = DEFAULT_DATABASE,
    project: str | None = None,
) -> Store:
    """The run store a `store` setting names (`firestore`, or a Valkey server's URL), its records
    in `collection` (of Firestore's `database` in `project`), or under it as a key prefix;
    ConfigError naming what to set when it cannot be built. Nothing is sent before its first call.
    A Valkey server's CA (`valkeys://`) may also come as PEM text in RUNONCE_STORE_CA, as the stack
    gives a Memorystore instance's (docs/stacks/stores.md)."""
    if store == FIRESTORE:
        return LedgerStore(Ledger(_client(project, database), collection, lease, retention))
    try:
        from .valkey import connect
    except ImportError as exc:
        raise ConfigError(
            f"the store is a Valkey server and its client cannot be loaded ({describe(exc, 200)}): "
            "install runonce with the valkey extra, pip install 'runonce[valkey]'"
        ) from None
    return connect(store, collection, lease, retention, ca=os.environ.get(STORE_CA_VARIABLE) or None)


def _client(project: str | None, database: str) -> firestore.Client:
    try:
        return firestore.Client(project=project, database=database)
    except auth_exceptions.DefaultCredentialsError as exc:
        raise ConfigError(
            f"no Google Cloud credentials ({describe(exc, 300)}): deployed, the function's service "
            "account provides them; locally, run `gcloud auth application-default login`, set "
            "GOOGLE_APPLICATION_CREDENTIALS to a key file, or set FIRESTORE_EMULATOR_HOST for the emulator"
        ) from None
    except auth_exceptions.GoogleAuthError as exc:
        raise ConfigError(
            f"the Google Cloud credentials cannot be used ({describe(exc, 300)}): "
            "check GOOGLE_APPLICATION_CREDENTIALS or the function's service account"
        ) from None
    except OSError as exc:  # google.cloud.client: "Project was not passed and could not be determined"
        raise ConfigError(
            f"no Google Cloud project ({describe(exc, 300)}): set GOOGLE_CLOUD_PROJECT to the "
            "project of the ledger's Firestore database"
        ) from None
