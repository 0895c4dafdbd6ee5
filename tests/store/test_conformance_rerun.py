"""The re-run verbs of the `Store` conformance suite (docs/rerun.md): every test runs on the
Firestore ledger (the real emulator), on the Valkey store (a real server) and on the in-memory
store, and asks the same answers of all three.

What a store must do: refuse a request for a run with no record, in progress, completed (unless
insisted) or while the job has a pending request; let exactly one forced delivery consume a
pending request, reopening the run (its finished state kept in its history, the operator's action
recorded) and recording that delivery as the re-run's; tell every later delivery under that key
the same re-run without consuming anything; consume nothing expired or withdrawn; withdraw only a
request still pending; and keep a reopened run's record (with its history) when its claim is
released.
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest

from emulator.wire import TappedClient, WireTap
from runonce.contract import ACTIONS_FIELD, HISTORY_FIELD, RunStatus
from runonce.core import store as api
from runonce.core.errors import StoreUnavailable
from runonce.core.requests import RerunRefused
from runonce.core.store import Claim, Held, Rerun, Store, StoredResult
from runonce.store.memory import MemoryStore
from tests.conftest import PROJECT, SCHEDULED

LEASE = timedelta(seconds=120)
RETENTION = timedelta(days=7)
TTL = timedelta(minutes=10)
START = SCHEDULED + timedelta(seconds=5)
"""Where the `clock` fixture starts."""
RUN = "run-of-2026-11-29T03:00:00Z"
FIELDS = {"job": "acme-nightly", "schedule_time": "2026-11-29T03:00:00Z", "forced": False}
SLOT = "rerun-acme-nightly"
FORCED = "forced-before-2026-11-30T03:00:00Z"
FORCED_FIELDS = {"job": "acme-nightly", "schedule_time": "2026-11-30T03:00:00Z", "forced": True}
REQUEST = {"by": "user:ops@example.com", "schedule_time": "2026-11-29T03:00:00Z"}


@pytest.fixture(params=["firestore", "valkey", pytest.param("memory", marks=pytest.mark.fast)])
def kind(request) -> str:
    """Which store the test runs on."""
    return request.param


@pytest.fixture
def store(kind, clock, request) -> Store:
    """A store with a 120 s lease and 7 days of retention, empty."""
    if kind == "memory":
        return MemoryStore(LEASE, RETENTION, clock)
    if kind == "valkey":
        return request.getfixturevalue("valkey_store")(LEASE, RETENTION, clock)
    from runonce.store.firestore import Ledger, LedgerStore

    request.getfixturevalue("firestore_emulator")
    client = TappedClient(WireTap(), project=PROJECT)
    return LedgerStore(Ledger(client, f"conformance_{uuid.uuid4().hex[:12]}", LEASE, RETENTION))


def _finished(store: Store, ending: str = "fail", key: str = RUN) -> dict[str, Any]:
    """Run `key` claimed and finished (`fail` or `complete`); its record."""
    claim = store.claim(key, dict(FIELDS))
    assert isinstance(claim, Claim), claim
    if ending == "fail":
        assert store.fail(claim, "upstream refused: 400")
    else:
        assert store.complete(claim, StoredResult.of({"rows": 1})) is not None
    record = store.read(key)
    assert record is not None
    return record


def _request(store: Store, key: str = RUN, insist: bool = False):
    return store.request_rerun(SLOT, key, dict(REQUEST), insist, TTL)


def _consumed(store: Store, forced: str = FORCED) -> Rerun:
    rerun = store.take_rerun(SLOT, forced, dict(FORCED_FIELDS))
    assert rerun is not None and rerun.claim is not None, rerun
    return rerun


def _in_threads(calls: list[Callable[[], object]]) -> list[object]:
    """Run every call at once (a barrier starts them together); their answers (or exceptions), in order."""
    barrier = threading.Barrier(len(calls))
    answers: list[object] = [None] * len(calls)

    def run(index: int) -> None:
        barrier.wait()
        try:
            answers[index] = calls[index]()
        except Exception as exc:  # kept, so the assertion names it
            answers[index] = exc

    threads = [threading.Thread(target=run, args=(index,)) for index in range(len(calls))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    return answers


def test_a_request_for_a_failed_run_is_pending_in_the_jobs_slot_until_its_ttl(store):
    _finished(store)
    request = _request(store)
    assert (request.slot, request.key, request.schedule_time) == (SLOT, RUN, REQUEST["schedule_time"])
    assert (request.by, request.at, request.expires) == (REQUEST["by"], START, START + TTL)
    slot = store.read(SLOT)
    assert slot[api.REQUEST_STATE_FIELD] == api.RequestState.PENDING.value
    assert (slot["request_id"], slot["rerun_key"], slot["requested_by"]) == (
        request.request_id,
        RUN,
        REQUEST["by"],
    )
    assert slot["expire_at"] == START + RETENTION


def test_a_request_for_a_run_with_no_record_is_refused_and_writes_nothing(store):
    with pytest.raises(RerunRefused, match="no record"):
        _request(store)
    assert store.read(SLOT) is None


def test_a_request_for_a_run_in_progress_is_refused_and_writes_nothing(store):
    assert isinstance(store.claim(RUN, dict(FIELDS)), Claim)
    before = store.read(RUN)
    with pytest.raises(RerunRefused, match="in progress"):
        _request(store)
    assert (store.read(SLOT), store.read(RUN)) == (None, before)


def test_a_run_left_in_progress_under_an_ended_lease_is_re_run_and_its_dead_attempt_fenced_out(store, clock):
    # Scheduler's retries ran out on a claim whose attempt died (the watchdog's retried_out): no
    # delivery will come, and a release only ends the lease. A re-run is what runs it again.
    dead = store.claim(RUN, dict(FIELDS))
    assert isinstance(dead, Claim)
    clock.advance(LEASE.total_seconds() + 1)
    _request(store)
    rerun = _consumed(store)
    assert rerun.claim is not None and rerun.claim.key == RUN
    record = store.read(RUN)
    assert record is not None and record["attempt_id"] == rerun.claim.attempt_id
    assert [entry["status"] for entry in record[HISTORY_FIELD]] == [RunStatus.IN_PROGRESS.value]
    assert store.complete(dead, StoredResult.of("late")) is None  # the dead attempt finishes nothing
    assert store.complete(rerun.claim, StoredResult.of("done")) is not None


def test_a_request_for_a_completed_run_is_refused_unless_insisted(store):
    _finished(store, "complete")
    with pytest.raises(RerunRefused, match="--insist"):
        _request(store)
    assert store.read(SLOT) is None
    assert _request(store, insist=True).key == RUN


def test_a_second_request_while_one_is_pending_is_refused_and_the_first_stays(store):
    _finished(store)
    _finished(store, key="another-run")
    first = _request(store)
    with pytest.raises(RerunRefused, match="pending re-run request"):
        _request(store, "another-run")
    assert store.read(SLOT)["request_id"] == first.request_id


def test_a_request_may_replace_one_that_expired(store, clock):
    _finished(store)
    first = _request(store)
    clock.advance(TTL.total_seconds())
    second = _request(store)
    assert second.request_id != first.request_id
    assert store.read(SLOT)["request_id"] == second.request_id


def test_a_forced_delivery_with_no_request_is_an_ordinary_forced_run_and_writes_nothing(store):
    _finished(store)
    assert store.take_rerun(SLOT, FORCED, dict(FORCED_FIELDS)) is None
    assert (store.read(FORCED), store.read(SLOT)) == (None, None)


def test_the_forced_delivery_that_consumes_a_request_reopens_the_run_keeping_its_history(store):
    failed = _finished(store)
    request = _request(store)
    rerun = _consumed(store)
    assert (rerun.key, rerun.schedule_time) == (RUN, REQUEST["schedule_time"])
    assert rerun.claim is not None
    assert (rerun.claim.key, rerun.claim.attempt, rerun.claim.reopened) == (RUN, 2, True)
    record = store.read(RUN)
    assert record["status"] == RunStatus.IN_PROGRESS.value
    assert (record["attempt_id"], record["previous_attempt_id"]) == (
        rerun.claim.attempt_id,
        failed["attempt_id"],
    )
    assert (record["lease_expires"], record["claimed_at"]) == (START + LEASE, START)
    assert "error" not in record and "finished_at" not in record
    [entry] = record[HISTORY_FIELD]
    assert (entry["status"], entry["error"], entry["attempt_id"]) == (
        "failed",
        "upstream refused: 400",
        failed["attempt_id"],
    )
    assert entry["finished_at"] == failed["finished_at"]
    [action] = record[ACTIONS_FIELD]
    assert (action["action"], action["by"], action["at"]) == ("rerun", REQUEST["by"], START)
    assert request.request_id in action["detail"] and FORCED in action["detail"]
    delivery = store.read(FORCED)
    assert (delivery[api.RERUN_OF_FIELD], delivery[api.RERUN_TIME_FIELD]) == (RUN, REQUEST["schedule_time"])
    assert {name: delivery[name] for name in FORCED_FIELDS} == FORCED_FIELDS
    slot = store.read(SLOT)
    assert (slot[api.REQUEST_STATE_FIELD], slot["consumed_by"]) == (api.RequestState.CONSUMED.value, FORCED)


def test_a_reopened_runs_claim_finishes_fenced_and_its_history_stays(store):
    _finished(store)
    _request(store)
    claim = _consumed(store).claim
    assert claim is not None
    assert store.complete(claim, StoredResult.of({"rows": 2})) is not None
    record = store.read(RUN)
    assert (record["status"], record["result_json"]) == ("completed", '{"rows":2}')
    assert [entry["status"] for entry in record[HISTORY_FIELD]] == ["failed"]
    held = store.claim(RUN, dict(FIELDS))
    assert isinstance(held, Held) and held.status is RunStatus.COMPLETED


def test_a_later_delivery_under_the_consuming_key_is_told_the_same_rerun_and_consumes_nothing(store):
    _finished(store)
    _finished(store, key="another-run")
    _request(store)
    claim = _consumed(store).claim
    assert claim is not None and store.fail(claim, "still refused")
    second = _request(store, "another-run")
    again = store.take_rerun(SLOT, FORCED, dict(FORCED_FIELDS))
    assert again == Rerun(RUN, REQUEST["schedule_time"], None)
    slot = store.read(SLOT)
    assert slot["request_id"] == second.request_id
    assert slot[api.REQUEST_STATE_FIELD] == api.RequestState.PENDING.value
    assert [entry["status"] for entry in store.read(RUN)[HISTORY_FIELD]] == ["failed"]


def test_an_ordinary_forced_runs_record_is_not_a_rerun_and_a_pending_request_stays(store):
    _finished(store)
    forced = store.claim(FORCED, dict(FORCED_FIELDS))
    assert isinstance(forced, Claim)
    request = _request(store)
    assert store.take_rerun(SLOT, FORCED, dict(FORCED_FIELDS)) is None
    assert store.read(SLOT)[api.REQUEST_STATE_FIELD] == api.RequestState.PENDING.value
    assert store.read(SLOT)["request_id"] == request.request_id


def test_an_expired_request_is_not_consumed(store, clock):
    failed = _finished(store)
    _request(store)
    clock.advance(TTL.total_seconds())
    assert store.take_rerun(SLOT, FORCED, dict(FORCED_FIELDS)) is None
    assert (store.read(RUN), store.read(FORCED)) == (failed, None)


def test_a_withdrawn_request_is_not_consumed_and_cannot_be_withdrawn_twice(store):
    failed = _finished(store)
    request = _request(store)
    assert store.withdraw_rerun(SLOT, request.request_id)
    assert store.read(SLOT)[api.REQUEST_STATE_FIELD] == api.RequestState.WITHDRAWN.value
    assert not store.withdraw_rerun(SLOT, request.request_id)
    assert store.take_rerun(SLOT, FORCED, dict(FORCED_FIELDS)) is None
    assert (store.read(RUN), store.read(FORCED)) == (failed, None)


def test_withdrawing_a_consumed_or_replaced_request_writes_nothing(store, clock):
    _finished(store)
    consumed = _request(store)
    _consumed(store)
    before = store.read(SLOT)
    assert not store.withdraw_rerun(SLOT, consumed.request_id)
    assert not store.withdraw_rerun(SLOT, "another-request")
    assert store.read(SLOT) == before


def test_a_request_whose_run_is_gone_is_void_and_the_delivery_is_an_ordinary_forced_run(store, kind):
    _finished(store)
    _request(store)
    if kind == "memory":  # the record's TTL deletion, as the ledger's
        del store._records[RUN]  # type: ignore[attr-defined]
    elif kind == "valkey":  # the key's own expiry
        store._client.delete(store._key(RUN))  # type: ignore[attr-defined]
    else:
        store.ledger._collection.document(RUN).delete()  # type: ignore[attr-defined]
    assert store.take_rerun(SLOT, FORCED, dict(FORCED_FIELDS)) is None
    assert (store.read(RUN), store.read(FORCED)) == (None, None)
    assert store.read(SLOT)[api.REQUEST_STATE_FIELD] == api.RequestState.VOID.value


def test_releasing_a_reopened_runs_claim_ends_its_lease_and_keeps_its_record(store, clock):
    _finished(store)
    _request(store)
    claim = _consumed(store).claim
    assert claim is not None
    clock.advance(3)
    assert store.release(claim)
    record = store.read(RUN)
    assert (record["status"], record["lease_expires"]) == ("in_progress", START + timedelta(seconds=3))
    assert [entry["status"] for entry in record[HISTORY_FIELD]] == ["failed"]
    retry = store.claim(RUN, dict(FIELDS))
    assert isinstance(retry, Claim)
    assert (retry.attempt, retry.reopened) == (3, True)
    assert store.read(RUN)[HISTORY_FIELD] == record[HISTORY_FIELD]


def test_of_two_forced_deliveries_racing_for_one_request_exactly_one_consumes_it(store):
    _finished(store)
    _request(store)
    answers = _in_threads(
        [lambda key=f"forced-{index}": store.take_rerun(SLOT, key, dict(FORCED_FIELDS)) for index in range(2)]
    )
    # Each is told the re-run, nothing, or (Firestore, when the two transactions lock each other
    # out past the budget, even after the winner committed) a store error its delivery retries on:
    # the ledger holds exactly one consumption whatever each was told.
    assert all(answer is None or isinstance(answer, Rerun | StoreUnavailable) for answer in answers), answers
    assert sum(isinstance(answer, Rerun) and answer.claim is not None for answer in answers) <= 1, answers
    assert len(store.read(RUN)[HISTORY_FIELD]) == 1
    assert store.read(SLOT)["consumed_by"] in {"forced-0", "forced-1"}


def test_of_two_deliveries_with_one_key_racing_for_a_request_one_claims_and_both_are_told_the_rerun(store):
    _finished(store)
    _request(store)
    answers = _in_threads([lambda: store.take_rerun(SLOT, FORCED, dict(FORCED_FIELDS)) for _ in range(2)])
    told = [answer for answer in answers if isinstance(answer, Rerun) and answer.key == RUN]
    # As above, a delivery that loses the race on Firestore may get a store error to retry on;
    # its retry is told the re-run (the marker record says which).
    assert len(told) + sum(isinstance(answer, StoreUnavailable) for answer in answers) == 2, answers
    claims = [answer.claim for answer in answers if isinstance(answer, Rerun) and answer.claim is not None]
    assert len(claims) <= 1, answers
    assert not claims or store.read(RUN)["attempt_id"] == claims[0].attempt_id
    assert len(store.read(RUN)[HISTORY_FIELD]) == 1
    retried = store.take_rerun(SLOT, FORCED, dict(FORCED_FIELDS))
    assert isinstance(retried, Rerun) and retried.key == RUN and retried.claim is None


def test_a_request_withdrawn_while_a_delivery_consumes_it_is_either_withdrawn_or_consumed(store):
    failed = _finished(store)
    request = _request(store)
    withdrawn, taken = _in_threads(
        [
            lambda: store.withdraw_rerun(SLOT, request.request_id),
            lambda: store.take_rerun(SLOT, FORCED, dict(FORCED_FIELDS)),
        ]
    )
    state = store.read(SLOT)[api.REQUEST_STATE_FIELD]
    if withdrawn is True:
        assert (taken, state) == (None, api.RequestState.WITHDRAWN.value)
        assert (store.read(RUN), store.read(FORCED)) == (failed, None)
    else:
        assert withdrawn is False, withdrawn
        assert isinstance(taken, Rerun) and taken.claim is not None, taken
        assert state == api.RequestState.CONSUMED.value


def test_a_request_whose_schedule_time_is_not_rfc_3339_is_refused_and_writes_nothing(store):
    _finished(store)
    with pytest.raises(RerunRefused, match="not an RFC 3339 time"):
        store.request_rerun(SLOT, RUN, {**REQUEST, "schedule_time": "yesterday"}, False, TTL)
    assert store.read(SLOT) is None


def test_a_history_entry_keeps_a_small_result_and_says_why_a_large_one_is_not_kept(store):
    _finished(store, "complete")
    _request(store, insist=True)
    claim = _consumed(store).claim
    assert claim is not None
    large = StoredResult.of({"text": "x" * 2000})
    assert store.complete(claim, large) is not None
    _request(store, insist=True)
    _consumed(store, "forced-again")
    small, dropped = store.read(RUN)[HISTORY_FIELD]
    assert small["result_json"] == '{"rows":1}'
    assert "result_json" not in dropped
    assert large.text is not None
    assert (dropped["result_stored"], dropped["result_dropped"]) == (
        False,
        f"{len(large.text)} bytes, not kept in history",
    )
