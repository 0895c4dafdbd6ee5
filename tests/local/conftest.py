"""The local suites' Valkey server: one real Redis-protocol server per test session, started on
first use (after the Firestore emulator, which keeps the jobs' effects), for the instances that
keep their runs there (RUNONCE_STORE)."""

from __future__ import annotations

import pytest

from emulator.process import EmulatorUnavailable
from emulator.valkey import ValkeyServer


@pytest.fixture(scope="session")
def valkey_url(firestore_emulator):
    """The URL of a running server (valkey-server, else redis-server), as RUNONCE_STORE takes it."""
    try:
        server = ValkeyServer()
    except EmulatorUnavailable as exc:
        pytest.fail(f"cannot run the Valkey suites: {exc}", pytrace=False)
    yield server.url
    server.stop()
