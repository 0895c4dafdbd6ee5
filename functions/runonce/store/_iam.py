"""IAM authentication to Memorystore for Valkey (a store URL's `auth=iam`): the runtime account's
OAuth access token is the AUTH password of every new connection, fetched again before it expires.

Memorystore checks the token and the account's `memorystore.instances.connect` permission
(docs/library.md, "The Valkey store"). google-auth (the Firestore client's dependency already) is
imported only when a token is first needed.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any
from urllib.parse import SplitResult, unquote

import valkey
from valkey.credentials import CredentialProvider

from .. import _clock
from .._text import describe
from ..core.errors import ConfigError

Tokens = Callable[[], tuple[str, datetime]]
"""Gives an access token and when it expires."""
REFRESH_BEFORE = timedelta(minutes=5)
"""A token this close to its expiry is not sent on a new connection: a fresh one is fetched."""
CLOUD_PLATFORM = "https://www.googleapis.com/auth/cloud-platform"


class IamPassword(CredentialProvider):
    """AUTH [`username`] TOKEN for each new connection, the token from `tokens` (default: the
    application default credentials', `google_tokens`), kept until REFRESH_BEFORE its expiry on
    runonce's clock."""

    def __init__(self, username: str | None, tokens: Tokens | None = None):
        self._username = username
        self._tokens = tokens or google_tokens()
        self._lock = threading.Lock()
        self._token = ""
        self._expiry: datetime | None = None

    def get_credentials(self) -> tuple[str] | tuple[str, str]:
        """What the client sends with AUTH; a token that cannot be had is an AuthenticationError
        naming why (the store answers StoreDenied)."""
        with self._lock:
            if self._expiry is None or _clock.now() >= self._expiry - REFRESH_BEFORE:
                try:
                    self._token, self._expiry = self._tokens()
                except Exception as exc:  # google-auth's errors, or a transport's
                    raise valkey.AuthenticationError(
                        f"no IAM access token for the Valkey store ({describe(exc, 300)}): deployed, the "
                        "runtime service account gives it; locally, `gcloud auth application-default login`"
                    ) from exc
            token = self._token
        return (self._username, token) if self._username else (token,)


def iam_password(
    shown: str, parts: SplitResult, auth: str, tokens: Tokens | None
) -> tuple[SplitResult, IamPassword]:
    """For a store URL (`parts`, `shown` with its password hidden) with `auth`: the URL without
    its user, and the provider of its AUTH; ConfigError naming the URL and the fix when `auth` is
    not `iam` or the URL has a password too."""
    if auth != "iam":
        raise ConfigError(
            f"the store URL {shown!r} has auth={auth!r}: give auth=iam for Memorystore's IAM "
            "authentication, or leave it out (AUTH with the URL's USER:PASSWORD, if any)"
        )
    if parts.password is not None:
        raise ConfigError(
            f"the store URL {shown!r} has a password and auth=iam: the IAM access token is the "
            "password; drop the password (a USER may stay)"
        )
    username = unquote(parts.username) if parts.username else None
    return parts._replace(netloc=parts.netloc.rpartition("@")[2]), IamPassword(username, tokens)


def google_tokens() -> Tokens:
    """The application default credentials' access token (the runtime account's on Cloud Run),
    refreshed on each call, and its expiry (now where the credentials give none)."""
    credentials: list[Any] = []

    def fetch() -> tuple[str, datetime]:
        import google.auth
        from google.auth.transport.requests import Request

        if not credentials:
            credentials.append(google.auth.default(scopes=[CLOUD_PLATFORM])[0])
        credentials[0].refresh(Request())
        expiry = credentials[0].expiry  # google-auth's expiry is naive UTC
        return credentials[0].token, expiry.replace(tzinfo=UTC) if expiry else _clock.now()

    return fetch
