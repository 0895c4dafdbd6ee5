"""The completions of the `Store` conformance suite (`Run.previous`, docs/library.md): on the
Firestore ledger (the real emulator), on the Valkey store (a real server) and on the in-memory
store.

What a store must do: enter a completed run in its job's completions in the completion's own
fenced write (no write more, and none when the fence refuses the completion); answer the latest
entry scheduled before a given time in one read, so a backfilled older run never hides a newer
one from a later run; and keep an entry as long as the run's record.
"""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from runonce.core.store import Claim, Done, Previous, Store, StoredResult, done_id
from runonce.scheduler.keys import completions
from tests.store.test_conformance import LEASE, RETENTION, START, kind, lose_next_answer, store, tap, writes

__all__ = ["kind", "lose_next_answer", "store", "tap", "writes"]  # the fixtures, shared with the suite

INDEX = completions("demo-project", "europe-west1", "sync-orders")
OTHER_INDEX = completions("demo-project", "europe-west1", "sync-orders-v2")


def _done(hour: int, index: str = INDEX) -> Done:
    at = datetime(2026, 11, 29, hour, tzinfo=UTC)
    return Done(index, int(at.timestamp()) * 10**6, at.strftime("%Y-%m-%dT%H:%M:%SZ"))


def _before(hour: int) -> int:
    return _done(hour).order


def _completed(store: Store, hour: int, result: object, index: str = INDEX) -> str:
    """Claim and complete the run of `hour`, entered in `index`; its run key."""
    key = f"sync-orders-{index[-6:]}-{hour:02d}"
    claim = store.claim(key, {"job": "sync-orders", "schedule_time": _done(hour).schedule_time})
    assert isinstance(claim, Claim), claim
    assert store.complete(claim, StoredResult.of(result), _done(hour, index)) is not None
    return key


def test_a_job_with_no_completed_run_has_no_previous(store):
    assert store.previous(INDEX, _before(3)) is None


def test_a_newer_completed_run_moves_the_previous(store):
    first = _completed(store, 3, {"cursor": 100})
    assert store.previous(INDEX, _before(4)) == Previous(
        first, "2026-11-29T03:00:00Z", StoredResult.of({"cursor": 100})
    )
    second = _completed(store, 4, {"cursor": 250})
    found = store.previous(INDEX, _before(5))
    assert (found.key, found.schedule_time, found.result) == (second, "2026-11-29T04:00:00Z", {"cursor": 250})


def test_a_backfilled_older_run_does_not_move_the_previous_back(store):
    _completed(store, 5, {"cursor": 500})
    _completed(store, 3, {"cursor": 300})  # completed later, scheduled earlier: a backfill
    assert store.previous(INDEX, _before(6)).result == {"cursor": 500}
    assert store.previous(INDEX, _before(5)).result == {"cursor": 300}
    assert store.previous(INDEX, _before(3)) is None


def test_the_previous_is_the_latest_run_scheduled_strictly_before_the_asking_run(store):
    _completed(store, 3, {"cursor": 300})
    _completed(store, 4, {"cursor": 400})
    assert store.previous(INDEX, _before(4)).result == {"cursor": 300}


def test_runs_in_flight_together_read_the_same_previous(store):
    _completed(store, 3, {"cursor": 300})
    first = store.claim("sync-orders-04", {"job": "sync-orders"})
    second = store.claim("sync-orders-05", {"job": "sync-orders"})
    assert isinstance(first, Claim) and isinstance(second, Claim)
    assert store.previous(INDEX, _before(4)) == store.previous(INDEX, _before(5))
    assert store.previous(INDEX, _before(5)).result == {"cursor": 300}


def test_completing_a_run_again_replaces_its_entry(store):
    _completed(store, 3, {"cursor": 300})
    again = store.claim("sync-orders-03-rerun", {"job": "sync-orders"})
    assert isinstance(again, Claim)
    assert store.complete(again, StoredResult.of({"cursor": 333}), _done(3)) is not None
    found = store.previous(INDEX, _before(4))
    assert (found.key, found.result) == ("sync-orders-03-rerun", {"cursor": 333})


def test_another_job_name_has_its_own_completions(store):
    _completed(store, 3, {"cursor": 300})
    assert store.previous(OTHER_INDEX, _before(4)) is None
    _completed(store, 3, {"cursor": 1}, OTHER_INDEX)
    assert store.previous(INDEX, _before(4)).result == {"cursor": 300}


def test_a_result_not_stored_is_told_as_not_stored(store):
    _completed(store, 3, {"huge": "x" * 20_000})
    found = store.previous(INDEX, _before(4))
    assert found.result is None and found.stored.dropped is not None


def test_a_completion_refused_by_the_fence_enters_nothing(store, clock):
    stale = store.claim("sync-orders-03", {"job": "sync-orders"})
    assert isinstance(stale, Claim)
    clock.advance(LEASE.total_seconds())
    fresh = store.claim("sync-orders-03", {"job": "sync-orders"})
    assert isinstance(fresh, Claim)
    assert store.complete(stale, StoredResult.of({"cursor": "stale"}), _done(3)) is None
    assert store.previous(INDEX, _before(4)) is None
    assert store.complete(fresh, StoredResult.of({"cursor": "fresh"}), _done(3)) is not None
    assert store.previous(INDEX, _before(4)).result == {"cursor": "fresh"}


def test_an_attempt_killed_after_its_effect_leaves_the_previous_where_it_was(store, clock):
    _completed(store, 3, {"cursor": 300})
    killed = store.claim("sync-orders-04", {"job": "sync-orders"})
    assert isinstance(killed, Claim)  # its job ran, then the process died: no completion
    assert store.previous(INDEX, _before(5)).result == {"cursor": 300}
    clock.advance(LEASE.total_seconds())
    takeover = store.claim("sync-orders-04", {"job": "sync-orders"})
    assert isinstance(takeover, Claim) and takeover.attempt == 2
    assert store.previous(INDEX, _before(4)).result == {"cursor": 300}  # what the takeover reads
    assert store.complete(takeover, StoredResult.of({"cursor": 400}), _done(4)) is not None
    assert store.previous(INDEX, _before(5)).result == {"cursor": 400}


def test_an_entry_is_not_listed_as_a_run(store):
    key = _completed(store, 3, {"cursor": 300})
    assert set(store.find({"job": "sync-orders"})) == {key}


def test_an_entry_expires_with_its_run(store):
    key = _completed(store, 3, {"cursor": 300})
    entries = [name for name in _all_keys(store) if name.startswith(INDEX)]
    assert len(entries) == 1
    assert store.read(entries[0])["expire_at"] == store.read(key)["expire_at"] == START + RETENTION


def _all_keys(store: Store) -> list[str]:
    """Every record id (the entries have no `job`, so `find` does not list them)."""
    if hasattr(store, "keys_starting"):
        return store.keys_starting("done-", 10)
    if hasattr(store, "ledger"):
        return [doc.id for doc in store.ledger._collection.list_documents()]
    return list(store._records)


def test_a_completion_with_its_entry_is_one_write(kind, store, writes):
    if kind == "memory":
        pytest.skip("the in-memory store sends nothing: its writes are not counted")
    claim = store.claim("sync-orders-03", {"job": "sync-orders"})
    assert isinstance(claim, Claim)
    before = writes()
    assert store.complete(claim, StoredResult.of({"cursor": 300}), _done(3)) is not None
    assert writes() == before + 1


def test_a_completion_whose_answer_was_lost_is_entered_once(store, lose_next_answer, writes):
    claim = store.claim("sync-orders-03", {"job": "sync-orders"})
    assert isinstance(claim, Claim)
    lose_next_answer()
    assert store.complete(claim, StoredResult.of({"cursor": 300}), _done(3)) is not None
    assert writes() == 3  # the claim, the completion that landed, its retry refused by the fence
    found = store.previous(INDEX, _before(4))
    assert (found.key, found.result) == ("sync-orders-03", {"cursor": 300})


def test_entries_sort_as_their_schedule_times_across_digit_counts(store):
    early = Done(INDEX, 999_999_999, "1970-01-01T00:16:39.999999Z")
    late = Done(INDEX, 1_000_000_000, "1970-01-01T00:16:40Z")
    for key, done in (("late", late), ("early", early)):
        claim = store.claim(key, {"job": "sync-orders"})
        assert isinstance(claim, Claim)
        assert store.complete(claim, StoredResult.of(key), done) is not None
    assert store.previous(INDEX, late.order + 1).result == "late"
    assert store.previous(INDEX, late.order).result == "early"


def test_on_valkey_an_entry_whose_record_expired_is_passed_over_and_unlisted(valkey_store):
    store = valkey_store(LEASE, RETENTION)
    _completed(store, 3, {"cursor": 300})
    _completed(store, 4, {"cursor": 400})
    expired = done_id(INDEX, _before(4))
    store._client.delete(store._key(expired))  # as its TTL would
    assert store.previous(INDEX, _before(5)).result == {"cursor": 300}
    assert store._client.zscore(f"{store._prefix}:done:{INDEX}", expired) is None
