"""What a failover does to the Valkey store's records, on a real primary and replica whose
replication link runs through a proxy the test freezes (docs/library.md, "The Valkey store").

Without WAIT, a claim the primary acknowledged before the replica copied it is gone after the
replica's promotion, and a second attempt claims the run: the documented loss, shown. With
`replicas=1`, that claim is refused (released, raised as StoreUnavailable: nothing ran), and the
run is claimed once, on the promoted replica. The function library is replicated with the data.
"""

from __future__ import annotations

import json
from datetime import timedelta

import pytest

from runonce.core.errors import ConfigError, StoreDenied, StoreUnavailable
from runonce.core.store import Claim, StoredResult
from tests.store.valkey_server import ReplyDropper, ValkeyServer

LEASE = timedelta(seconds=120)
RETENTION = timedelta(days=7)
KEY = "nightly-report-2026-11-29T03:00:00Z"
FIELDS = {"job": "nightly-report", "schedule_time": "2026-11-29T03:00:00Z", "forced": False}
PREFIX = "failover"


def _store(port: int, replicas: int = 0, wait: timedelta = timedelta(seconds=2)):
    import valkey

    from runonce.store.valkey import ValkeyStore

    client = valkey.Valkey(port=port, decode_responses=True, socket_timeout=10)
    return ValkeyStore(client, PREFIX, LEASE, RETENTION, replicas=replicas, replica_wait=wait)


def _claim(store, key: str = KEY) -> Claim:
    claim = store.claim(key, dict(FIELDS))
    assert isinstance(claim, Claim), claim
    return claim


@pytest.fixture
def pair(valkey_server):
    """A primary, and a replica of it whose replication link runs through a freezable proxy,
    in sync."""
    primary = ValkeyServer("--repl-diskless-sync-delay", "0")
    link = ReplyDropper(primary.port)
    replica = ValkeyServer("--replicaof", "127.0.0.1", str(link.port))
    import valkey

    client = valkey.Valkey(port=primary.port, decode_responses=True)
    client.set("replica-connected", 1)
    assert client.execute_command("WAIT", 1, 20_000) == 1  # the first sync copies the whole dataset
    client.close()
    yield primary, link, replica
    link.close()
    replica.stop()
    primary.stop()


def _in_sync(store) -> None:
    """The replica has every write so far (and the function library, loaded by a first claim)."""
    _claim(store, "before-the-freeze")
    assert store._client.execute_command("WAIT", 1, 10_000) == 1


def _promote(replica: ValkeyServer):
    import valkey

    client = valkey.Valkey(port=replica.port, decode_responses=True)
    client.execute_command("REPLICAOF", "NO", "ONE")
    libraries = [dict(zip(entry[::2], entry[1::2], strict=True)) for entry in client.function_list()]
    client.close()
    return [library["library_name"] for library in libraries]


def test_without_wait_a_claim_lost_in_a_failover_is_claimed_again_by_a_second_attempt(pair):
    from runonce.store.valkey import LIBRARY_VERSION

    primary, link, replica = pair
    store = _store(primary.port)
    _in_sync(store)
    link.freeze()
    first = _claim(store)  # acknowledged by the primary alone
    primary.kill()
    assert _promote(replica) == [f"runonce_{LIBRARY_VERSION}"]  # replicated with the data
    promoted = _store(replica.port)
    assert promoted.read("before-the-freeze") is not None
    assert promoted.read(KEY) is None
    second = _claim(promoted)
    assert (second.attempt, first.attempt) == (1, 1) and second.attempt_id != first.attempt_id


def test_with_wait_a_claim_no_replica_acknowledged_is_refused_and_the_run_is_claimed_once(pair):
    primary, link, replica = pair
    store = _store(primary.port, replicas=1)
    _in_sync(store)
    link.freeze()
    with pytest.raises(StoreUnavailable, match=r"acknowledged by 0 of the 1 replicas .* nothing ran"):
        store.claim(KEY, dict(FIELDS))
    assert store.read(KEY) is None  # released on the primary too
    primary.kill()
    _promote(replica)
    promoted = _store(replica.port)
    assert promoted.read(KEY) is None
    assert _claim(promoted).attempt == 1


def test_with_wait_a_completion_no_replica_acknowledged_is_kept_and_logged(pair, capsys):
    primary, link, _ = pair
    store = _store(primary.port, replicas=1)
    _in_sync(store)
    claim = _claim(store)
    link.freeze()
    assert store.complete(claim, StoredResult.of("ok")) is not None
    assert store.read(KEY)["status"] == "completed"
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [line["severity"] for line in lines] == ["WARNING"]
    assert f"run {KEY} is recorded completed, acknowledged by 0 of the 1 replicas" in lines[0]["message"]


def test_waiting_for_a_replica_adds_no_round_trip(pair):
    import valkey

    from runonce.store.valkey import ValkeyStore

    primary, _, _ = pair
    proxy = ReplyDropper(primary.port)
    try:
        client = valkey.Valkey(port=proxy.port, decode_responses=True, socket_timeout=10)
        store = ValkeyStore(client, PREFIX, LEASE, RETENTION, replicas=1, replica_wait=timedelta(seconds=2))
        store.release(_claim(store, "warm-up"))
        proxy.round_trips = 0
        assert store.complete(_claim(store), StoredResult.of("ok")) is not None
        assert proxy.round_trips == 2  # FCALL and WAIT pipelined, twice
        client.close()
    finally:
        proxy.close()


def test_with_no_replica_at_all_every_claim_is_refused_and_leaves_no_record(valkey_server):
    store = _store(valkey_server.port, replicas=1, wait=timedelta(milliseconds=50))
    with pytest.raises(StoreUnavailable, match="acknowledged by 0 of the 1 replicas"):
        store.claim(KEY, dict(FIELDS))
    assert store.read(KEY) is None


def test_a_server_that_refuses_wait_is_refused_at_the_first_call_naming_the_setting(valkey_server):
    import valkey

    from runonce.store.valkey import ValkeyStore

    server = ValkeyServer()
    try:
        admin = valkey.Valkey(port=server.port, decode_responses=True)
        admin.execute_command("ACL", "SETUSER", "runner", "on", ">secret", "~*", "&*", "+@all", "-wait")
        admin.close()
        client = valkey.Valkey(port=server.port, decode_responses=True, username="runner", password="secret")
        with pytest.raises(StoreDenied, match="refuses WAIT; set replicas=0"):
            ValkeyStore(client, PREFIX, LEASE, RETENTION, replicas=1).claim(KEY, dict(FIELDS))
        assert isinstance(ValkeyStore(client, PREFIX, LEASE, RETENTION).claim(KEY, dict(FIELDS)), Claim)
        client.close()
    finally:
        server.stop()


@pytest.mark.parametrize("replicas", [-1, 1.5, True])
def test_replicas_is_a_count_of_zero_or_more(valkey_server, replicas):
    import valkey

    from runonce.store.valkey import ValkeyStore

    client = valkey.Valkey(port=valkey_server.port, decode_responses=True)
    with pytest.raises(ConfigError, match="replicas is"):
        ValkeyStore(client, PREFIX, LEASE, RETENTION, replicas=replicas)
    client.close()
