"""The settings, Firestore client and run store of one decorated function, built at first use:
the Firestore ledger, or the Valkey store its `store` setting names (loaded only then).

Built lazily, so importing a module never fails or touches the network. Whatever stops them being
built (an invalid setting, no project, no credentials) becomes a ConfigError naming what to set;
it is answered `misconfigured` and tried again at the next request, until it is fixed.
"""

from __future__ import annotations

import threading
from typing import Any, NamedTuple

from google.auth import exceptions as auth_exceptions
from google.cloud import firestore

from .._text import describe
from ..core.errors import ConfigError
from ..core.settings import FIRESTORE, Settings, load_settings
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
                settings = load_settings(self._overrides)
                if settings.store != FIRESTORE:
                    self._setup = Setup(settings, _valkey_store(settings), settings.project)
                    return self._setup
                client = self._client or _client(settings)
                self._setup = Setup(
                    settings,
                    LedgerStore(Ledger(client, settings.collection, settings.lease, settings.retention)),
                    getattr(client, "project", None),
                )
            return self._setup


def _valkey_store(settings: Settings) -> Store:
    """The Valkey store the `store` setting names, its records under the collection's name."""
    try:
        from .valkey import connect
    except ImportError as exc:
        raise ConfigError(
            f"the store is a Valkey server and its client cannot be loaded ({describe(exc, 200)}): "
            "install runonce with the valkey extra, pip install 'runonce[valkey]'"
        ) from None
    return connect(settings.store, settings.collection, settings.lease, settings.retention)


def _client(settings: Settings) -> firestore.Client:
    try:
        return firestore.Client(project=settings.project, database=settings.database)
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
