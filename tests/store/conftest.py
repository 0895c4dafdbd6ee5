"""The Valkey store's server: one real Redis-protocol server per test session (`valkey_server`),
started on first use like the emulators, and a store on it behind a proxy that can lose answers."""

from __future__ import annotations

import os
import uuid
from collections.abc import Callable
from datetime import datetime, timedelta

import pytest

from emulator.process import EmulatorUnavailable
from tests.conftest import FAST_TIER_VARIABLE
from tests.store.valkey_server import ReplyDropper, ValkeyServer


@pytest.fixture(scope="session")
def valkey_server():
    """A running server (valkey-server, else redis-server) for the whole session."""
    if os.environ.get(FAST_TIER_VARIABLE):
        pytest.fail("the fast tier starts no server, and this test needs the Valkey server: it is not fast")
    try:
        server = ValkeyServer()
    except EmulatorUnavailable as exc:
        pytest.fail(f"cannot run the Valkey store's tests: {exc}", pytrace=False)
    yield server
    server.stop()


@pytest.fixture
def valkey_proxy(valkey_server):
    """A proxy to the session's server that loses the answers a test tells it to."""
    proxy = ReplyDropper(valkey_server.port)
    yield proxy
    proxy.close()


@pytest.fixture
def valkey_store(valkey_proxy) -> Callable[..., object]:
    """Make a Valkey store through the proxy, with its own key prefix (an empty store)."""
    import valkey

    from runonce.store.valkey import ValkeyStore

    clients: list[valkey.Valkey] = []

    def make(
        lease: timedelta, retention: timedelta, clock: Callable[[], datetime] | None = None
    ) -> ValkeyStore:
        client = valkey.Valkey(port=valkey_proxy.port, decode_responses=True, socket_timeout=10)
        clients.append(client)
        return ValkeyStore(client, f"test_{uuid.uuid4().hex[:12]}", lease, retention, clock)

    yield make
    for client in clients:
        client.close()
