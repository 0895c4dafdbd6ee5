"""What the Valkey store is beyond the conformance suite, on a real server: the fencing token on
every record, leases judged on the server's clock, the key's own expiry at `expire_at`, a server
that may evict refused, the function library loaded again when the server lost it, and a cold
start that loads no Valkey client unless the store is chosen."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from runonce.contract import ACTIONS_FIELD
from runonce.core.errors import StoreDenied
from runonce.core.store import Claim, Held, StoredResult
from tests.conftest import ManualClock
from tests.store.valkey_server import ValkeyServer

LEASE = timedelta(seconds=120)
RETENTION = timedelta(days=7)
KEY = "nightly-report-2026-11-29T03:00:00Z"
FIELDS = {"job": "nightly-report", "schedule_time": "2026-11-29T03:00:00Z", "forced": False}


def _claim(store, key: str = KEY) -> Claim:
    claim = store.claim(key, dict(FIELDS))
    assert isinstance(claim, Claim), claim
    return claim


def _fence(store, key: str = KEY) -> int:
    return int(store._client.hget(store._key(key), ".fence"))


def _server_now(store) -> datetime:
    seconds, microseconds = store._client.time()
    return datetime.fromtimestamp(seconds, UTC) + timedelta(microseconds=microseconds)


# Fencing: a token on every record, strictly increasing on every write of it.


def test_every_write_of_a_record_moves_its_token_forward_and_the_claim_carries_it(valkey_store):
    store = valkey_store(LEASE, RETENTION)
    claim = _claim(store)
    tokens = [_fence(store)]
    assert store.hold(claim, 600, "the outcome is unknown")
    tokens.append(_fence(store))
    store.annotate(KEY, {"checked": True})
    tokens.append(_fence(store))
    assert tokens == sorted(set(tokens))  # strictly increasing
    assert claim.update_time == datetime(1970, 1, 1, tzinfo=UTC) + timedelta(microseconds=tokens[0])


def test_the_token_increases_even_when_the_servers_clock_is_behind_it(valkey_store):
    store = valkey_store(LEASE, RETENTION)
    claim = _claim(store)
    ahead = _fence(store) + 3_600_000_000  # as if written by a server whose clock ran an hour ahead
    store._client.hset(store._key(KEY), ".fence", str(ahead))
    forged = claim._replace(update_time=datetime(1970, 1, 1, tzinfo=UTC) + timedelta(microseconds=ahead))
    assert store.hold(forged, 600, "the outcome is unknown")
    assert _fence(store) == ahead + 1


def test_a_finishing_write_with_the_runs_token_but_another_attempt_is_refused(valkey_store):
    store = valkey_store(LEASE, RETENTION)
    claim = _claim(store)
    before = store.read(KEY)
    impostor = claim._replace(attempt_id="another-attempt")
    assert store.complete(impostor, StoredResult.of("stolen")) is None
    assert not store.fail(impostor, "stolen")
    assert not store.release(impostor)
    assert store.read(KEY) == before
    assert store.complete(claim, StoredResult.of("ok")) is not None


# Leases on the server's clock.


def test_a_lease_is_judged_on_the_servers_clock_not_the_processs(valkey_store, clock: ManualClock):
    store = valkey_store(LEASE, RETENTION)  # no clock given: the server's
    before = _server_now(store)
    claim = _claim(store)
    after = _server_now(store)
    record = store.read(KEY)
    assert before <= record["claimed_at"] <= after
    assert record["lease_expires"] == record["claimed_at"] + LEASE
    clock.advance(LEASE.total_seconds() * 10)  # runonce's clock in this process: far past the lease
    held = store.claim(KEY, dict(FIELDS))
    assert isinstance(held, Held) and held.lease_expires == record["lease_expires"]
    assert store.complete(claim, StoredResult.of("ok")) is not None


def test_a_lease_ends_when_the_servers_clock_passes_it_and_the_next_attempt_takes_over(valkey_store):
    store = valkey_store(timedelta(milliseconds=200), RETENTION)
    stale = _claim(store)
    lease_expires = store.read(KEY)["lease_expires"]
    deadline = time.monotonic() + 10
    while _server_now(store) <= lease_expires and time.monotonic() < deadline:
        time.sleep(0.05)
    fresh = _claim(store)
    assert fresh.attempt == 2 and store.read(KEY)["previous_attempt_id"] == stale.attempt_id
    assert store.complete(stale, StoredResult.of("late")) is None


# The key's own expiry: `expire_at`.


def test_the_keys_expiry_is_the_records_expire_at_and_moves_with_each_write(valkey_store):
    store = valkey_store(LEASE, RETENTION)
    claim = _claim(store)
    record = store.read(KEY)
    expires_in = timedelta(milliseconds=store._client.pttl(store._key(KEY)))
    assert abs(record["expire_at"] - (_server_now(store) + expires_in)) < timedelta(seconds=2)
    time.sleep(0.01)
    assert store.complete(claim, StoredResult.of("ok")) is not None
    finished = store.read(KEY)
    assert finished["expire_at"] == finished["finished_at"] + RETENTION > record["expire_at"]
    expires_in = timedelta(milliseconds=store._client.pttl(store._key(KEY)))
    assert abs(finished["expire_at"] - (_server_now(store) + expires_in)) < timedelta(seconds=2)


def test_an_expired_record_is_gone_and_the_listing_prunes_it_from_its_index(valkey_store):
    store = valkey_store(LEASE, timedelta(seconds=3))  # long enough to see the index list it
    _claim(store)
    index = f'{store._prefix}:job:"{FIELDS["job"]}"'
    assert store._client.zscore(index, KEY) is not None
    deadline = time.monotonic() + 10
    while store.exists(KEY) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert store.read(KEY) is None
    assert store.find({"job": FIELDS["job"]}) == {}
    assert store._client.zscore(index, KEY) is None


# Eviction: a server that may delete records to free memory is refused.


@pytest.mark.parametrize("policy", ["volatile-lru", "allkeys-lru", "volatile-ttl"])
def test_a_server_that_may_evict_is_refused_at_the_first_call_naming_the_setting_and_the_fix(
    valkey_server, policy
):
    import valkey

    from runonce.store.valkey import ValkeyStore

    server = ValkeyServer("--maxmemory-policy", policy)
    try:
        client = valkey.Valkey(port=server.port, decode_responses=True)
        store = ValkeyStore(client, "evicting", LEASE, RETENTION)  # no call yet
        with pytest.raises(StoreDenied) as refused:
            store.claim(KEY, dict(FIELDS))
        assert store._client.exists(store._key(KEY)) == 0
        client.close()
    finally:
        server.stop()
    assert f"maxmemory-policy is '{policy}'" in str(refused.value)
    assert "set maxmemory-policy to noeviction" in str(refused.value)


@pytest.mark.parametrize("hidden", ["renamed", "denied"])
def test_a_server_that_hides_its_configuration_is_served_with_a_warning_naming_the_setting(
    valkey_server, capsys, hidden
):
    """Memorystore answers CONFIG GET with NOPERM (its supported commands list CONFIG HELP alone);
    a self-run server may rename CONFIG away."""
    import valkey

    from runonce.store.valkey import ValkeyStore

    server = ValkeyServer("--rename-command", "CONFIG", "") if hidden == "renamed" else ValkeyServer()
    try:
        login: dict[str, str] = {}
        if hidden == "denied":
            admin = valkey.Valkey(port=server.port, decode_responses=True)
            admin.execute_command("ACL", "SETUSER", "runner", "on", ">secret", "~*", "&*", "+@all", "-config")
            admin.close()
            login = {"username": "runner", "password": "secret"}
        client = valkey.Valkey(port=server.port, decode_responses=True, **login)
        store = ValkeyStore(client, "hidden", LEASE, RETENTION)
        assert store.complete(_claim(store), StoredResult.of("ok")) is not None
        client.close()
    finally:
        server.stop()
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [line["severity"] for line in lines] == ["WARNING"]
    assert "maxmemory-policy" in lines[0]["message"] and "noeviction" in lines[0]["message"]


# Round trips: the happy path is two (claim, complete), a duplicate of a finished run one.


def test_a_run_takes_two_round_trips_and_a_duplicate_of_it_one(valkey_store, valkey_proxy):
    store = valkey_store(LEASE, RETENTION)
    store.release(_claim(store, "warm-up"))  # the first call also checks the server, loads the library
    valkey_proxy.round_trips = 0
    assert store.complete(_claim(store), StoredResult.of("ok")) is not None
    assert valkey_proxy.round_trips == 2
    assert isinstance(store.claim(KEY, dict(FIELDS)), Held)
    assert valkey_proxy.round_trips == 3


# Answers lost on the way back, beyond the conformance suite's: a transaction's commit, a lock taken.


def test_a_transaction_whose_commit_answer_was_lost_is_recognised_as_landed_not_written_twice(
    valkey_store, valkey_proxy, clock
):
    store = valkey_store(LEASE, RETENTION, clock)
    claim = _claim(store)
    action = {"action": "release", "by": "operator@example.com", "at": clock(), "detail": {}}
    valkey_proxy.lose_next_answer("commit")
    written = store.release_held(KEY, claim.attempt_id, action, force=True)
    assert valkey_proxy.calls["commit"] == 2  # the commit that landed, and the one sent again
    assert isinstance(written, dict) and written[ACTIONS_FIELD] == [action]
    assert store.read(KEY)[ACTIONS_FIELD] == [action]


def test_a_lock_taken_whose_answer_was_lost_is_recognised_as_taken(valkey_store, valkey_proxy):
    from runonce.contract import Overlap
    from runonce.core.store import JobLock
    from runonce.store._records import LOCK_ATTEMPT_FIELD

    store = valkey_store(LEASE, RETENTION)
    claim = _claim(store)
    lock = JobLock("lock-nightly-report", Overlap.SKIP)
    valkey_proxy.lose_next_answer("take_lock")
    taken = store.take_lock(claim, lock)
    assert valkey_proxy.calls["take_lock"] == 2
    assert isinstance(taken, Claim) and taken.lock == lock.id
    assert store.read(lock.id)[LOCK_ATTEMPT_FIELD] == claim.attempt_id
    assert store.complete(taken, StoredResult.of("ok")) is not None
    assert store.read(lock.id) is None


# The function library: loaded again whenever the server has lost it.


def test_the_library_is_loaded_again_after_function_flush_and_the_claim_still_finishes(valkey_store):
    from runonce.store.valkey import LIBRARY_VERSION

    store = valkey_store(LEASE, RETENTION)
    claim = _claim(store)
    store._client.function_flush()
    assert store._client.function_list() == []
    assert store.complete(claim, StoredResult.of("ok")) is not None
    libraries = [dict(zip(entry[::2], entry[1::2], strict=True)) for entry in store._client.function_list()]
    assert [library["library_name"] for library in libraries] == [f"runonce_{LIBRARY_VERSION}"]
    assert store.read(KEY)["status"] == "completed"


# Cold start: the Valkey client is loaded only with the store.


@pytest.mark.fast
def test_importing_runonce_and_its_stores_package_loads_no_valkey_client():
    script = (
        "import sys; import runonce, runonce.store.connection, runonce.core.handler, runonce.store.memory; "
        "print(sorted(m for m in sys.modules if m.split('.')[0] == 'valkey'))"
    )
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2] / "functions")}
    run = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True, env=env)
    assert run.stdout.strip() == "[]"
