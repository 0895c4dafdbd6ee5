"""IAM authentication to the Valkey store (`auth=iam` in its URL): every new connection sends AUTH
with an access token as the password, fetched again once it is within REFRESH_BEFORE of its
expiry; proven on a real server whose default user is off and whose ACL user's password is the
token the test's provider gives (no Google call), the token rotated on the server."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import pytest
import valkey

from runonce.core.errors import ConfigError, StoreDenied
from runonce.core.store import Claim, StoredResult
from runonce.store import _iam
from runonce.store.valkey import connect
from tests.store.valkey_server import ValkeyServer

LEASE, RETENTION = timedelta(seconds=60), timedelta(days=1)


class Tokens:
    """The test's token provider: hands out `tokens` in turn, each expiring `lifetime` after the
    test's clock reads when it is asked; counts the calls."""

    def __init__(self, clock, *tokens: str, lifetime: timedelta = timedelta(hours=1)):
        self._clock = clock
        self._tokens = list(tokens)
        self._lifetime = lifetime
        self.calls = 0

    def __call__(self) -> tuple[str, datetime]:
        self.calls += 1
        return self._tokens.pop(0), self._clock() + self._lifetime


@pytest.fixture(scope="module")
def locked_server(request) -> Iterator[tuple[ValkeyServer, valkey.Valkey]]:
    """A server of its own whose default user is off (every connection must AUTH), and an admin
    connection (authenticated as default before it was turned off) to change its ACL."""
    request.getfixturevalue("valkey_server")  # fails the fast tier, as every test needing a server
    server = ValkeyServer()
    admin = valkey.Valkey(port=server.port, decode_responses=True)
    admin.execute_command("ACL", "SETUSER", "runner", "on", ">token-1", "~*", "&*", "+@all")
    admin.execute_command("ACL", "SETUSER", "default", "off")
    yield server, admin
    admin.close()
    server.stop()


def _claimed(store) -> Claim:
    claim = store.claim(f"run-{uuid.uuid4().hex[:8]}", {"job": "nightly"})
    assert isinstance(claim, Claim)
    return claim


def _runner_connections(admin: valkey.Valkey) -> int:
    return sum(1 for client in admin.client_list() if client["user"] == "runner")


def test_auth_iam_sends_the_providers_token_as_the_password_of_its_user(locked_server, clock):
    server, admin = locked_server
    tokens = Tokens(clock, "token-1")
    store = connect(f"valkey://runner@127.0.0.1:{server.port}?auth=iam", "iam", LEASE, RETENTION, tokens)
    claim = _claimed(store)
    assert store.complete(claim, StoredResult.of(1)) is not None
    assert tokens.calls == 1 and _runner_connections(admin) >= 1
    with pytest.raises(StoreDenied):  # the server refuses a connection that does not authenticate
        _claimed(connect(f"valkey://127.0.0.1:{server.port}", "iam", LEASE, RETENTION))


def test_a_new_connection_reuses_a_fresh_token_and_fetches_one_near_its_expiry(locked_server, clock):
    server, admin = locked_server
    admin.execute_command("ACL", "SETUSER", "runner", "resetpass", ">token-1")
    tokens = Tokens(clock, "token-1", "token-2", lifetime=timedelta(minutes=10))
    store = connect(f"valkey://runner@127.0.0.1:{server.port}?auth=iam", "iam", LEASE, RETENTION, tokens)
    _claimed(store)
    clock.advance(60)  # 9 minutes left: the token is still sent
    admin.execute_command("CLIENT", "KILL", "USER", "runner")
    _claimed(store)
    assert tokens.calls == 1
    clock.advance(5 * 60)  # 4 minutes left, within REFRESH_BEFORE: the server now wants the next token
    admin.execute_command("ACL", "SETUSER", "runner", "resetpass", ">token-2")
    admin.execute_command("CLIENT", "KILL", "USER", "runner")
    _claimed(store)
    assert tokens.calls == 2


def test_a_token_that_cannot_be_had_is_store_denied_naming_why(locked_server, clock):
    server, _ = locked_server

    def no_token() -> tuple[str, datetime]:
        raise RuntimeError("Your default credentials were not found")

    store = connect(f"valkey://runner@127.0.0.1:{server.port}?auth=iam", "iam", LEASE, RETENTION, no_token)
    with pytest.raises(StoreDenied) as denied:
        _claimed(store)
    assert "no IAM access token for the Valkey store (Your default credentials were not found)" in str(
        denied.value
    )


@pytest.mark.fast
@pytest.mark.parametrize(
    ("url", "named"),
    [
        (
            "valkey://10.0.0.3:6379?auth=password",
            "the store URL 'valkey://10.0.0.3:6379?auth=password' has auth='password': give auth=iam",
        ),
        (
            "valkey://runner:s3cret@10.0.0.3:6379?auth=iam",
            "the store URL 'valkey://runner:***@10.0.0.3:6379?auth=iam' has a password and auth=iam",
        ),
    ],
)
def test_an_auth_setting_runonce_cannot_use_is_a_config_error_naming_the_url(url, named):
    with pytest.raises(ConfigError) as raised:
        connect(url, "iam", LEASE, RETENTION)
    assert named in str(raised.value) and "s3cret" not in str(raised.value)


@pytest.mark.fast
def test_the_default_tokens_are_the_application_default_credentials_refreshed_with_their_expiry(
    monkeypatch,
):
    import google.auth

    class Credentials:
        token, expiry, refreshed = "", None, 0

        def refresh(self, request) -> None:
            self.refreshed += 1
            self.token, self.expiry = f"ya29.{self.refreshed}", datetime(2026, 12, 7, 8, 0)  # naive UTC

    asked: list[list[str]] = []
    credentials = Credentials()
    monkeypatch.setattr(google.auth, "default", lambda scopes: asked.append(scopes) or (credentials, "p"))
    fetch = _iam.google_tokens()
    assert fetch() == ("ya29.1", datetime(2026, 12, 7, 8, 0, tzinfo=UTC))
    assert fetch() == ("ya29.2", datetime(2026, 12, 7, 8, 0, tzinfo=UTC))
    assert asked == [[_iam.CLOUD_PLATFORM]]  # the credentials are looked up once, refreshed each time
