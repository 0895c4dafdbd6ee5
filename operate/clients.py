"""The Google clients the command uses: the team's ledger, and Pub/Sub.

Each honours its emulator's variable (FIRESTORE_EMULATOR_HOST, PUBSUB_EMULATOR_HOST), as the
client libraries do, and otherwise uses the application default credentials (`gcloud auth
application-default login`). The operator's name on every change comes from those credentials,
or from `--by` (required on the emulators, where there are none: $USER is taken if set).
"""

from __future__ import annotations

import getpass
import os
from datetime import timedelta
from typing import Any

from google.auth import exceptions as auth_exceptions

from operate.team import BadInput, TeamView
from runonce.core.settings import DEFAULT_RETENTION_SECONDS
from runonce.core.store import Store
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


def store(team: TeamView | Team, retention_seconds: int = DEFAULT_RETENTION_SECONDS) -> Store:
    """The team's ledger (its project, database and collection) as a Store; what it writes (a
    re-run request) expires after `retention_seconds`, the job's retention."""
    from google.cloud import firestore

    from runonce.store.firestore import Ledger, LedgerStore

    try:
        client = firestore.Client(project=team.project, database=team.database)
    except auth_exceptions.GoogleAuthError as exc:
        raise BadInput("credentials", f"{exc}; {_CREDENTIALS_FIX}") from None
    retention = timedelta(seconds=retention_seconds)
    return LedgerStore(Ledger(client, team.collection, _UNUSED_LEASE, retention))


def collection(team: TeamView) -> Any:
    """The team's ledger as a Firestore collection, for the queries no Store offers (a key prefix)."""
    from google.cloud import firestore

    try:
        return firestore.Client(project=team.project, database=team.database).collection(team.collection)
    except auth_exceptions.GoogleAuthError as exc:
        raise BadInput("credentials", f"{exc}; {_CREDENTIALS_FIX}") from None


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
