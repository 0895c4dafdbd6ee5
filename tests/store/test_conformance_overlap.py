"""The job lock of the `Store` conformance suite (docs/schedules/overlap.md): every test runs on the Firestore
ledger (the real emulator), on the Valkey store (a real server) and on the in-memory store, and
asks the same answers of all three.

What a store must do: take a `skip` or `wait` job's lock with the run's claim, under the claim's
fence; tell a run that meets another run holding the lock under a live lease that it overlapped,
recording it skipped under `skip` and writing nothing under `wait`; free the lock with the
holder's complete, fail and release, and hold it as long as an outcome-unknown hold; let the lock
end with its holder's lease (a crashed holder), with its holder's end (finished, taken over, or
released by an operator), and move with the holder's run when a retry takes that run over; and
never let a stale holder touch a lock another run took since.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from datetime import timedelta

import pytest

from runonce.contract import SKIPPED_FOR_FIELD, Overlap, RunStatus
from runonce.core.store import Claim, Held, JobLock, Overlapped, Store, StoredResult
from runonce.store._records import LOCK_ATTEMPT_FIELD, LOCK_HOLDER_FIELD
from tests.conftest import ManualClock
from tests.store.test_conformance import ACTION, FIELDS, LEASE, START
from tests.store.test_conformance import kind as kind  # the fixtures: one suite, two files
from tests.store.test_conformance import lose_next_answer as lose_next_answer
from tests.store.test_conformance import store as store
from tests.store.test_conformance import tap as tap

FIRST = "run-of-2026-11-29T03:00:00Z"
SECOND = "run-of-2026-11-29T03:05:00Z"
SECOND_FIELDS = {**FIELDS, "schedule_time": "2026-11-29T03:05:00Z"}
LOCK_ID = "lock-acme-nightly"
POLICIES = [Overlap.SKIP, Overlap.WAIT]


def _lock(policy: Overlap) -> JobLock:
    return JobLock(LOCK_ID, policy)


def _claim(store: Store, policy: Overlap, key: str = FIRST) -> Claim:
    claim = store.claim_locked(key, dict(FIELDS if key == FIRST else SECOND_FIELDS), _lock(policy))
    assert isinstance(claim, Claim), claim
    return claim


def _second(store: Store, policy: Overlap) -> Claim | Held | Overlapped:
    return store.claim_locked(SECOND, dict(SECOND_FIELDS), _lock(policy))


def _assert_overlapped(store: Store, answer: object, policy: Overlap, holder: str = FIRST) -> None:
    """`answer` says SECOND overlapped `holder`; SECOND is recorded skipped (skip) or not at all (wait)."""
    assert isinstance(answer, Overlapped), answer
    assert (answer.key, answer.policy, answer.holder) == (SECOND, policy, holder)
    record = store.read(SECOND)
    if policy is Overlap.WAIT:
        assert record is None
        return
    assert record is not None
    assert (record["status"], record[SKIPPED_FOR_FIELD], record["attempts"]) == ("skipped", holder, 0)
    assert record["schedule_time"] == SECOND_FIELDS["schedule_time"]


@pytest.mark.parametrize("policy", POLICIES)
def test_a_locked_claim_holds_the_run_and_the_job_lock_under_one_lease(store, policy):
    claim = _claim(store, policy)
    assert (claim.attempt, claim.lock) == (1, LOCK_ID)
    lock, run = store.read(LOCK_ID), store.read(FIRST)
    assert (lock[LOCK_HOLDER_FIELD], lock[LOCK_ATTEMPT_FIELD]) == (FIRST, claim.attempt_id)
    assert lock["lease_expires"] == run["lease_expires"] == START + LEASE
    assert "job" not in lock and "status" not in lock  # never listed as a run


def test_a_plain_claim_writes_no_lock(store):
    claim = store.claim(FIRST, dict(FIELDS))
    assert isinstance(claim, Claim) and claim.lock is None
    assert store.read(LOCK_ID) is None


@pytest.mark.parametrize("policy", POLICIES)
def test_a_run_that_meets_a_live_holder_overlaps_it(store, clock, policy):
    _claim(store, policy)
    before = store.read(LOCK_ID)
    clock.advance(LEASE.total_seconds() - 1)
    answer = _second(store, policy)
    _assert_overlapped(store, answer, policy)
    assert answer.lease_expires == START + LEASE
    assert store.read(LOCK_ID) == before


def test_a_skipped_run_is_finished_its_later_deliveries_are_told_skipped_and_never_run(store, clock):
    holder = _claim(store, Overlap.SKIP)
    _second(store, Overlap.SKIP)
    assert store.complete(holder, StoredResult.of("done")) is not None
    skipped = store.read(SECOND)
    clock.advance(2 * LEASE.total_seconds())
    told = _second(store, Overlap.SKIP)
    assert isinstance(told, Held), told
    assert (told.status, told.skipped_for) == (RunStatus.SKIPPED, FIRST)
    assert store.read(SECOND) == skipped


def test_a_waiting_run_claims_the_job_once_its_holder_finished(store):
    holder = _claim(store, Overlap.WAIT)
    assert isinstance(_second(store, Overlap.WAIT), Overlapped)
    assert store.complete(holder, StoredResult.of("done")) is not None
    claim = _second(store, Overlap.WAIT)
    assert isinstance(claim, Claim) and claim.attempt == 1
    assert store.read(LOCK_ID)[LOCK_HOLDER_FIELD] == SECOND


FINISHING: dict[str, Callable[[Store, Claim], object]] = {
    "complete": lambda store, claim: store.complete(claim, StoredResult.of({"rows": 1})),
    "fail": lambda store, claim: store.fail(claim, "upstream refused: 400"),
    "release": lambda store, claim: store.release(claim),
}


@pytest.mark.parametrize("policy", POLICIES)
@pytest.mark.parametrize("write", FINISHING)
def test_the_holders_finishing_write_frees_the_lock_in_the_same_write(store, policy, write):
    holder = _claim(store, policy)
    assert FINISHING[write](store, holder) not in (None, False)
    assert store.read(LOCK_ID) is None
    assert isinstance(_second(store, policy), Claim)


@pytest.mark.parametrize("policy", POLICIES)
def test_an_outcome_unknown_hold_keeps_the_lock_as_long_as_the_run(store, clock, policy):
    holder = _claim(store, policy)
    assert store.hold(holder, 600, "the outcome is unknown")
    assert store.read(LOCK_ID)["lease_expires"] == START + timedelta(seconds=600)
    clock.advance(599)
    _assert_overlapped(store, _second(store, policy), policy)
    clock.advance(1)
    if policy is Overlap.WAIT:
        assert isinstance(_second(store, policy), Claim)


@pytest.mark.parametrize("policy", POLICIES)
def test_a_crashed_holders_lock_ends_with_its_lease(store, clock, policy):
    _claim(store, policy)
    clock.advance(LEASE.total_seconds())
    claim = _second(store, policy)
    assert isinstance(claim, Claim) and claim.lock == LOCK_ID
    assert store.read(LOCK_ID)[LOCK_HOLDER_FIELD] == SECOND


@pytest.mark.parametrize("policy", POLICIES)
def test_a_stale_holder_finishing_late_leaves_the_lock_its_successor_took(store, clock, policy):
    stale = _claim(store, policy)
    clock.advance(LEASE.total_seconds())
    successor = _second(store, policy)
    assert isinstance(successor, Claim)
    lock = store.read(LOCK_ID)
    # Its own run was never taken over, so its completion lands; the lock is not its to free.
    assert store.complete(stale, StoredResult.of("late")) is not None
    assert store.read(FIRST)["status"] == "completed"
    assert store.read(LOCK_ID) == lock
    assert store.complete(successor, StoredResult.of("ok")) is not None
    assert store.read(LOCK_ID) is None


@pytest.mark.parametrize("policy", POLICIES)
def test_the_holders_retry_takes_its_run_and_the_lock_over_together(store, clock, policy):
    stale = _claim(store, policy)
    clock.advance(LEASE.total_seconds())
    fresh = _claim(store, policy)
    assert (fresh.attempt, fresh.lock) == (2, LOCK_ID)
    assert store.read(LOCK_ID)[LOCK_ATTEMPT_FIELD] == fresh.attempt_id
    before = store.read(LOCK_ID)
    assert store.complete(stale, StoredResult.of("stale")) is None
    assert store.read(LOCK_ID) == before
    _assert_overlapped(store, _second(store, policy), policy)


@pytest.mark.parametrize("policy", POLICIES)
def test_a_holder_an_operator_released_frees_the_lock_at_once(store, policy):
    holder = _claim(store, policy)
    assert isinstance(store.release_held(FIRST, holder.attempt_id, ACTION, force=True), dict)
    claim = _second(store, policy)
    assert isinstance(claim, Claim), claim


@pytest.mark.parametrize("policy", POLICIES)
def test_a_run_whose_own_lease_ended_overlaps_the_run_that_took_the_lock(store, clock, policy):
    _claim(store, policy)
    clock.advance(LEASE.total_seconds())
    assert isinstance(store.claim_locked(SECOND, dict(SECOND_FIELDS), _lock(policy)), Claim)
    before = store.read(FIRST)
    answer = store.claim_locked(FIRST, dict(FIELDS), _lock(policy))
    assert isinstance(answer, Overlapped) and (answer.key, answer.holder) == (FIRST, SECOND)
    record = store.read(FIRST)
    if policy is Overlap.WAIT:
        assert record == before
    else:
        assert (record["status"], record[SKIPPED_FOR_FIELD]) == ("skipped", SECOND)
        assert record["attempt_id"] == before["attempt_id"]


def test_a_run_skipped_over_its_own_ended_claim_fences_that_claim_out(store, clock):
    stale = _claim(store, Overlap.SKIP)
    clock.advance(LEASE.total_seconds())
    assert isinstance(store.claim_locked(SECOND, dict(SECOND_FIELDS), _lock(Overlap.SKIP)), Claim)
    assert isinstance(store.claim_locked(FIRST, dict(FIELDS), _lock(Overlap.SKIP)), Overlapped)
    skipped = store.read(FIRST)
    assert store.complete(stale, StoredResult.of("late")) is None
    assert store.read(FIRST) == skipped


def at_once(calls: list[Callable[[], object]]) -> list[object]:
    """Every call started at the same moment, each on its thread; what each returned (or raised,
    kept so that an assertion names it), in the order they ended."""
    barrier = threading.Barrier(len(calls))
    answers: list[object] = []
    lock = threading.Lock()

    def run(call: Callable[[], object]) -> None:
        barrier.wait()
        try:
            answer = call()
        except Exception as exc:
            answer = exc
        with lock:
            answers.append(answer)

    threads = [threading.Thread(target=run, args=(call,)) for call in calls]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    return answers


@pytest.mark.parametrize("policy", POLICIES)
def test_of_sixteen_runs_claimed_at_once_exactly_one_holds_the_job(store, policy):
    keys = [f"run-{number:02d}" for number in range(16)]

    def claim(key: str) -> Callable[[], object]:
        return lambda: store.claim_locked(key, {**FIELDS, "schedule_time": key}, _lock(policy))

    answers = at_once([claim(key) for key in keys])
    claims = [answer for answer in answers if isinstance(answer, Claim)]
    assert len(answers) == 16 and len(claims) == 1, answers
    others = [answer for answer in answers if not isinstance(answer, Claim)]
    assert all(isinstance(answer, Overlapped) and answer.holder == claims[0].key for answer in others), others
    assert store.read(LOCK_ID)[LOCK_HOLDER_FIELD] == claims[0].key
    skipped = [key for key in keys if (store.read(key) or {}).get("status") == "skipped"]
    assert len(skipped) == (15 if policy is Overlap.SKIP else 0)


# A re-run's claim, taken without the lock (`take_rerun`), takes it afterwards.


@pytest.mark.parametrize("policy", POLICIES)
def test_a_claim_takes_the_free_lock_and_moves_its_fence(store, policy):
    plain = store.claim(FIRST, dict(FIELDS))
    assert isinstance(plain, Claim)
    locked = store.take_lock(plain, _lock(policy))
    assert isinstance(locked, Claim) and locked.lock == LOCK_ID and locked.attempt_id == plain.attempt_id
    assert store.read(LOCK_ID)[LOCK_ATTEMPT_FIELD] == plain.attempt_id
    assert store.complete(plain, StoredResult.of("old fence")) is None
    assert store.complete(locked, StoredResult.of("ok")) is not None
    assert store.read(LOCK_ID) is None


@pytest.mark.parametrize("policy", POLICIES)
def test_a_claim_that_meets_a_holder_is_given_up_as_its_policy_says(store, clock, policy):
    _claim(store, policy)
    plain = store.claim(SECOND, dict(SECOND_FIELDS))
    assert isinstance(plain, Claim)
    answer = store.take_lock(plain, _lock(policy))
    assert isinstance(answer, Overlapped) and answer.holder == FIRST
    record = store.read(SECOND)
    if policy is Overlap.SKIP:
        assert (record["status"], record[SKIPPED_FOR_FIELD]) == ("skipped", FIRST)
    else:  # its lease ended: the next delivery takes the run over, once the job is free
        assert record["status"] == "in_progress" and record["lease_expires"] == START
    assert store.complete(plain, StoredResult.of("after giving up")) is None


def test_a_claim_no_longer_held_takes_no_lock(store, clock):
    stale = store.claim(FIRST, dict(FIELDS))
    assert isinstance(stale, Claim)
    clock.advance(LEASE.total_seconds())
    assert isinstance(store.claim(FIRST, dict(FIELDS)), Claim)
    answer = store.take_lock(stale, _lock(Overlap.SKIP))
    assert isinstance(answer, Held) and answer.status is RunStatus.IN_PROGRESS
    assert store.read(LOCK_ID) is None


# Lost answers exist only between a process and a remote store: the emulator and the Valkey server.


def test_a_locked_claim_whose_answer_was_lost_is_recognised_as_ours_with_its_lock(store, lose_next_answer):
    lose_next_answer()
    claim = _claim(store, Overlap.SKIP)
    assert claim.lock == LOCK_ID and store.read(LOCK_ID)[LOCK_ATTEMPT_FIELD] == claim.attempt_id
    assert store.complete(claim, StoredResult.of("ok")) is not None
    assert store.read(LOCK_ID) is None


@pytest.mark.parametrize("write", FINISHING)
def test_a_finishing_write_whose_answer_was_lost_still_frees_the_lock(store, lose_next_answer, write):
    claim = _claim(store, Overlap.SKIP)
    lose_next_answer()
    assert FINISHING[write](store, claim) not in (None, False)
    assert store.read(LOCK_ID) is None
    assert isinstance(_second(store, Overlap.SKIP), Claim)


def test_a_takeover_with_the_lock_whose_answer_was_lost_is_recognised_as_ours(
    store, clock: ManualClock, lose_next_answer
):
    _claim(store, Overlap.WAIT)
    clock.advance(LEASE.total_seconds())
    lose_next_answer()
    fresh = _claim(store, Overlap.WAIT)
    assert (fresh.attempt, fresh.lock) == (2, LOCK_ID)
    assert store.complete(fresh, StoredResult.of("ok")) is not None
    assert store.read(LOCK_ID) is None


# A skipped run counts as finished for `runonce rerun` (docs/rerun.md): no --insist, and reopened.


def test_a_skipped_run_is_rerun_without_insisting_and_reopened_with_its_skip_in_history(store):
    holder = _claim(store, Overlap.SKIP)
    _second(store, Overlap.SKIP)
    assert store.complete(holder, StoredResult.of("done")) is not None
    slot = "rerun-acme-nightly"
    request = {"by": "ops@example.com", "schedule_time": SECOND_FIELDS["schedule_time"]}
    store.request_rerun(slot, SECOND, request, False, timedelta(minutes=10))
    forced = {**FIELDS, "schedule_time": "2026-11-30T03:00:00Z", "forced": True}
    rerun = store.take_rerun(slot, "forced-delivery", forced)
    assert rerun is not None and rerun.key == SECOND and isinstance(rerun.claim, Claim)
    record = store.read(SECOND)
    assert record["status"] == "in_progress" and SKIPPED_FOR_FIELD not in record
    assert [(entry["status"], entry[SKIPPED_FOR_FIELD]) for entry in record["history"]] == [
        ("skipped", FIRST)
    ]
