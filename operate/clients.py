"""The clients the command uses: the team's run store, and Pub/Sub.

The run store is the one `runonce --store` names, else RUNONCE_STORE (as the team's functions are
given it), else Firestore: the team's ledger (its project, database and collection), or a Valkey
server's URL, the team's records under its collection's name. The Google clients honour their
emulator's variable (FIRESTORE_EMULATOR_HOST, PUBSUB_EMULATOR_HOST), as the client libraries do,
and otherwise use the application default credentials (`gcloud auth application-default login`).
The operator's name on every change comes from those credentials, or from `--by` (required on the
emulators, where there are none: $USER is taken if set).
"""

from __future__ import annotations

import getpass
import os
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import click
from click.core import ParameterSource
from google.auth import exceptions as auth_exceptions

from operate.team import BadInput, TeamView
from runonce.contract import STORE_VARIABLE
from runonce.core.errors import ConfigError
from runonce.core.settings import DEFAULT_RETENTION_SECONDS, FIRESTORE
from runonce.core.settings import store_setting as store_setting_of
from runonce.core.store import Store
from stacks import naming
from stacks.config.team import Team

FIRESTORE_EMULATOR = "FIRESTORE_EMULATOR_HOST"
# The ledger's lease and retention matter to claims only; the command never claims.
_UNUSED_LEASE = timedelta(seconds=1)
_CREDENTIALS_FIX = (
    "run `gcloud auth application-default login`, or set FIRESTORE_EMULATOR_HOST and "
    "PUBSUB_EMULATOR_HOST for the emulators"
)


class Unavailable(Exception):
    """A Google service refused a call or did not answer; the message names the resource (exit 1)."""


STORE_OPTION = "--store"


def store_setting() -> tuple[str, str]:
    """The run store the command works on, and where it was given: `--store`, else RUNONCE_STORE
    (the option reads it when it is not given), else Firestore; BadInput naming the one given if
    it names no store."""
    context = click.get_current_context(silent=True)
    root = context.find_root() if context is not None else None
    # A command run on its own (not under the `runonce` group) has no --store: the variable decides.
    grouped = root if root is not None and "store" in root.params else None
    given = grouped.params["store"] if grouped is not None else os.environ.get(STORE_VARIABLE)
    if given is None:
        return STORE_OPTION, FIRESTORE
    from_option = grouped is not None and grouped.get_parameter_source("store") is ParameterSource.COMMANDLINE
    name = STORE_OPTION if from_option else STORE_VARIABLE
    try:
        return name, store_setting_of(name, given)
    except ConfigError as exc:
        raise BadInput(name, str(exc).removeprefix(f"{name}=")) from None


def store(team: TeamView | Team, retention_seconds: int = DEFAULT_RETENTION_SECONDS) -> Store:
    """The team's run store (`store_setting`): its ledger (project, database, collection), or
    the Valkey server's records under the collection's name; what it writes (a re-run request)
    expires after `retention_seconds`, the job's retention."""
    return _opened(team.project, team.database, team.collection, timedelta(seconds=retention_seconds))


def key_lookup(team: TeamView) -> Callable[[str, int], list[str]]:
    """`lookup(start, most)`: at most `most` of the team's record ids that start with `start`, in
    order, the one that is `start` itself first (for `resolve_key`)."""
    found = store(team)
    if store_setting()[1] != FIRESTORE:
        return found.keys_starting  # type: ignore[attr-defined]
    from google.cloud.firestore_v1.base_query import FieldFilter
    from google.cloud.firestore_v1.field_path import FieldPath

    collection = found.ledger._client.collection(team.collection)  # type: ignore[attr-defined]
    name = FieldPath.document_id()

    def lookup(start: str, most: int) -> list[str]:
        query = (
            collection.where(filter=FieldFilter(name, ">=", collection.document(start)))
            .where(filter=FieldFilter(name, "<", collection.document(start + "\uffff")))
            .limit(most)
        )
        return [snapshot.id for snapshot in query.stream()]

    return lookup


def subscriber() -> Any:
    """A Pub/Sub subscriber client."""
    from google.cloud.pubsub_v1 import SubscriberClient

    try:
        return SubscriberClient()
    except auth_exceptions.GoogleAuthError as exc:
        raise BadInput("credentials", f"{exc}; {_CREDENTIALS_FIX}") from None


def publisher() -> Any:
    """A Pub/Sub publisher client."""
    from google.cloud.pubsub_v1 import PublisherClient

    try:
        return PublisherClient()
    except auth_exceptions.GoogleAuthError as exc:
        raise BadInput("credentials", f"{exc}; {_CREDENTIALS_FIX}") from None


MAX_BY_CHARS = 256
"""The longest `--by` kept on a record: an e-mail address is at most 254 characters."""


def operator(by: str | None) -> str:
    """Who makes a change: `by`, else the credentials' account, else (emulators) $USER. A `--by`
    given blank, or too long to be a name, is BadInput."""
    if by is not None:
        if not by.strip():
            raise BadInput("--by", "is blank: name who you are (--by you@example.com), or leave it out")
        if len(by) > MAX_BY_CHARS:
            raise BadInput(
                "--by", f"is {len(by)} characters, more than {MAX_BY_CHARS}: give a name or an e-mail address"
            )
        return by
    if os.environ.get(FIRESTORE_EMULATOR):
        try:
            return getpass.getuser()
        except (KeyError, OSError):
            raise BadInput(
                "--by", "on the emulators there is no account to name you by: pass --by NAME"
            ) from None
    import google.auth

    try:
        credentials, _ = google.auth.default()
    except auth_exceptions.GoogleAuthError as exc:
        raise BadInput("credentials", f"{exc}; {_CREDENTIALS_FIX}") from None
    # A service account's credentials name it (`service_account_email`; "default" on a metadata
    # server until refreshed); gcloud's user credentials carry `account` (google-auth's
    # google.oauth2.credentials.Credentials(account=...), empty when the file has none).
    account = getattr(credentials, "service_account_email", None) or getattr(credentials, "account", None)
    if not account or account == "default":
        raise BadInput("--by", "the credentials do not name their account: pass --by you@example.com")
    return str(account)


def watchdog_store(team: TeamView) -> Store:
    """The watchdog's own records (its pauses among them), which the command only reads: on
    Firestore its database beside the team's ledger, on a Valkey server its collection's name
    (`stacks.naming.WATCHDOG_COLLECTION`), on the store `store_setting` names."""
    database = naming.watchdog_database(team.database)
    retention = timedelta(seconds=DEFAULT_RETENTION_SECONDS)
    return _opened(team.project, database, naming.WATCHDOG_COLLECTION, retention)


def _opened(project: str, database: str, collection: str, retention: timedelta) -> Store:
    """The collection `collection` (of Firestore database `database`) on the store `store_setting`
    names; BadInput naming what to fix if it cannot be opened."""
    from runonce.store.connection import open_store

    name, setting = store_setting()
    try:
        return open_store(setting, collection, _UNUSED_LEASE, retention, database, project)
    except ConfigError as exc:
        if setting == FIRESTORE:
            raise BadInput("credentials", f"{exc}; {_CREDENTIALS_FIX}") from None
        raise BadInput(name, str(exc)) from None
