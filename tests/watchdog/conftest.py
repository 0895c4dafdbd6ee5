"""Fixtures for the watchdog's tests: a team's ledger and the watchdog's own store, both in memory
(the fast tier), both on the Firestore emulator or both on a Valkey server, on one manual clock;
and the ERROR lines the watchdog wrote, read back from stdout."""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass
from datetime import timedelta

import pytest

from runonce.contract import WATCHDOG_LOGGER
from runonce.core.store import Store
from runonce.store.memory import MemoryStore
from tests.conftest import PROJECT, STORES
from tests.store.conftest import valkey_server  # noqa: F401  (the session's server)

LEDGER_LEASE = timedelta(seconds=360)
"""The team's jobs' lease (timeout 300 s + 60 s)."""
WATCHDOG_LEASE = timedelta(seconds=120)
"""The watchdog's own lease on a claim of a missed run."""
RETENTION = timedelta(days=7)


@dataclass
class Stores:
    """The team's ledger and the watchdog's own store."""

    ledger: Store
    claims: Store


@pytest.fixture(params=[*STORES, "valkey"])
def stores(request, clock) -> Stores:
    """Both stores, empty, on the in-memory store, the Firestore emulator or the session's Valkey
    server (its records judged on the test's clock, the store's test hook)."""
    if request.param == "memory":
        return Stores(
            MemoryStore(LEDGER_LEASE, RETENTION, clock), MemoryStore(WATCHDOG_LEASE, RETENTION, clock)
        )
    if request.param == "valkey":
        import valkey

        from runonce.store.valkey import ValkeyStore

        server = request.getfixturevalue("valkey_server")
        client = valkey.Valkey(port=server.port, decode_responses=True, socket_timeout=10)
        request.addfinalizer(client.close)
        suffix = uuid.uuid4().hex[:10]
        return Stores(
            ValkeyStore(client, f"team_{suffix}", LEDGER_LEASE, RETENTION, clock),
            ValkeyStore(client, f"watchdog_{suffix}", WATCHDOG_LEASE, RETENTION, clock),
        )
    from google.cloud import firestore

    from runonce.store.firestore import Ledger, LedgerStore

    request.getfixturevalue("firestore_emulator")
    client = firestore.Client(project=PROJECT)
    suffix = uuid.uuid4().hex[:10]
    return Stores(
        LedgerStore(Ledger(client, f"team_{suffix}", LEDGER_LEASE, RETENTION)),
        LedgerStore(Ledger(client, f"watchdog_{suffix}", WATCHDOG_LEASE, RETENTION)),
    )


def watchdog_lines(text: str) -> list[dict]:
    """The watchdog's lines among everything written to stdout."""
    lines = [json.loads(line) for line in text.splitlines() if line.startswith("{")]
    return [line for line in lines if line.get("logger") == WATCHDOG_LOGGER]
