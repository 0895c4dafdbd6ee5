"""The `Store` conformance suite: every test runs on the Firestore ledger (the real emulator), on
the Valkey store (a real Redis-protocol server, `tests/store/conftest.py`) and on the in-memory
store, and each asks the same answers of all three.

What a store must do: claim a run under a lease; answer Held, with what it holds, for a live claim
or a finished run; let exactly one of many simultaneous claims win; let the next attempt take a run
over once its lease has ended; refuse every finishing write (complete, fail, release, hold) of a
claim that no longer holds the run, fenced by the update time the claim saw, and leave the record
as its holder wrote it. Lost answers (a write that lands while its answer does not) exist only
between a process and a remote store, so they are proven on the Firestore emulator and the Valkey
server alone (a proxy there drops the reply of a command that reached the server).
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Callable
from datetime import timedelta

import pytest

from emulator.wire import Fault, TappedClient, WireTap
from runonce import __version__
from runonce.contract import ACTIONS_FIELD, EXCLUDED_BECAUSE_FIELD, VERSION_FIELD, RunStatus
from runonce.core.errors import StoreRejected
from runonce.core.store import Claim, Held, Refusal, Store, StoredResult
from runonce.store.memory import MemoryStore
from tests.conftest import PROJECT, SCHEDULED, ManualClock

LEASE = timedelta(seconds=120)
RETENTION = timedelta(days=7)
START = SCHEDULED + timedelta(seconds=5)
"""Where the `clock` fixture starts."""
KEY = "nightly-report-2026-11-29T03:00:00Z"
FIELDS = {"job": "nightly-report", "schedule_time": "2026-11-29T03:00:00Z", "forced": False}
CLAIMED = {
    *FIELDS,
    "status",
    VERSION_FIELD,
    "attempt_id",
    "lease_expires",
    "expire_at",
    "claimed_at",
    "attempts",
}
"""The fields of a first claim's record, in every store."""


@pytest.fixture
def tap():
    """The Firestore client's wire, where a test loses an answer."""
    return WireTap()


@pytest.fixture(params=["firestore", "valkey", pytest.param("memory", marks=pytest.mark.fast)])
def kind(request) -> str:
    """Which store the test runs on."""
    return request.param


@pytest.fixture
def store(kind, clock, tap, request) -> Store:
    """A store with a 120 s lease and 7 days of retention, empty."""
    if kind == "memory":  # given the clock; the ledger reads runonce's, which `clock` sets
        return MemoryStore(LEASE, RETENTION, clock)
    if (
        kind == "valkey"
    ):  # decided on `clock` instead of the server's (tests/store/test_valkey.py: the server's)
        return request.getfixturevalue("valkey_store")(LEASE, RETENTION, clock)
    from runonce.store.firestore import Ledger, LedgerStore

    request.getfixturevalue("firestore_emulator")
    client = TappedClient(tap, project=PROJECT)
    return LedgerStore(Ledger(client, f"conformance_{uuid.uuid4().hex[:12]}", LEASE, RETENTION))


def _claim(store: Store, key: str = KEY) -> Claim:
    claim = store.claim(key, dict(FIELDS))
    assert isinstance(claim, Claim), claim
    return claim


def _taken_over(store: Store, clock: ManualClock) -> tuple[Claim, Claim]:
    """A first claim whose lease ran out, and the attempt that took the run over."""
    stale = _claim(store)
    clock.advance(LEASE.total_seconds())
    return stale, _claim(store)


def test_a_first_claim_is_attempt_one_and_records_the_run_in_progress_under_its_lease(store, clock):
    claim = _claim(store)
    assert (claim.key, claim.attempt) == (KEY, 1)
    record = store.read(KEY)
    assert set(record) == CLAIMED
    assert {name: record[name] for name in FIELDS} == FIELDS
    assert record["status"] == "in_progress"
    assert record[VERSION_FIELD] == __version__
    assert (record["attempt_id"], record["attempts"]) == (claim.attempt_id, 1)
    assert (record["claimed_at"], record["lease_expires"]) == (START, START + LEASE)
    assert record["expire_at"] == START + RETENTION


def test_each_claim_is_a_new_attempt_id(store):
    first = _claim(store, "run-a")
    assert first.attempt_id != _claim(store, "run-b").attempt_id


def test_a_live_claim_is_answered_held_in_progress_with_its_lease_and_the_record_is_unchanged(store, clock):
    _claim(store)
    before = store.read(KEY)
    clock.advance(LEASE.total_seconds() - 1)
    held = store.claim(KEY, dict(FIELDS))
    assert isinstance(held, Held)
    assert (held.key, held.status, held.lease_expires) == (KEY, RunStatus.IN_PROGRESS, START + LEASE)
    assert store.read(KEY) == before


def test_of_sixteen_threads_claiming_one_run_exactly_one_wins_and_the_rest_are_held(store):
    barrier = threading.Barrier(16)
    answers: list[object] = []
    lock = threading.Lock()

    def contend() -> None:
        barrier.wait()
        try:
            answer: object = store.claim(KEY, dict(FIELDS))
        except Exception as exc:  # kept, so the assertion below names it
            answer = exc
        with lock:
            answers.append(answer)

    threads = [threading.Thread(target=contend) for _ in range(16)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    claims = [answer for answer in answers if isinstance(answer, Claim)]
    others = [answer for answer in answers if not isinstance(answer, Claim)]
    assert len(answers) == 16
    assert len(claims) == 1, answers
    assert all(isinstance(held, Held) and held.status is RunStatus.IN_PROGRESS for held in others), others
    assert store.read(KEY)["attempt_id"] == claims[0].attempt_id


def test_a_claim_whose_lease_ended_is_taken_over_by_the_next_attempt(store, clock):
    stale, fresh = _taken_over(store, clock)
    assert fresh.attempt == 2 and fresh.attempt_id != stale.attempt_id
    record = store.read(KEY)
    assert set(record) == CLAIMED | {"previous_attempt_id"}
    assert (record["attempt_id"], record["previous_attempt_id"], record["attempts"]) == (
        fresh.attempt_id,
        stale.attempt_id,
        2,
    )
    assert record["lease_expires"] == START + 2 * LEASE
    assert {name: record[name] for name in FIELDS} == FIELDS


FINISHING: dict[str, Callable[[Store, Claim], object]] = {
    "complete": lambda store, claim: store.complete(claim, StoredResult.of({"rows": 1})),
    "fail": lambda store, claim: store.fail(claim, "upstream refused: 400"),
    "release": lambda store, claim: store.release(claim),
    "hold": lambda store, claim: store.hold(claim, 600, "the outcome is unknown"),
}
REFUSED = {"complete": None, "fail": False, "release": False, "hold": False}
"""What a finishing write answers when the claim no longer holds the run."""


@pytest.mark.parametrize("write", FINISHING)
def test_a_taken_over_claims_finishing_write_is_refused_and_leaves_the_new_attempts_record(
    store, clock, write
):
    stale, _ = _taken_over(store, clock)
    before = store.read(KEY)
    assert FINISHING[write](store, stale) == REFUSED[write]
    assert store.read(KEY) == before


@pytest.mark.parametrize("write", FINISHING)
@pytest.mark.parametrize("ending", ["complete", "fail"])
def test_a_taken_over_claims_finishing_write_is_refused_after_the_new_attempt_finished(
    store, clock, write, ending
):
    stale, fresh = _taken_over(store, clock)
    assert FINISHING[ending](store, fresh)
    before = store.read(KEY)
    assert FINISHING[write](store, stale) == REFUSED[write]
    assert store.read(KEY) == before


@pytest.mark.parametrize("write", FINISHING)
def test_the_fence_is_the_update_time_the_claim_saw_not_its_attempt_id(store, write):
    claim = _claim(store)
    forged = claim._replace(update_time=claim.update_time - timedelta(seconds=1))
    before = store.read(KEY)
    answer = FINISHING[write](store, forged)
    assert store.read(KEY) == before
    # A refused hold whose attempt still holds the run in progress is answered as one that landed
    # (the ledger cannot tell it from a hold whose answer was lost); it wrote nothing all the same.
    assert answer == (True if write == "hold" else REFUSED[write])


@pytest.mark.parametrize("write", ["complete", "fail", "release"])
def test_a_hold_moves_the_fence_so_the_holder_cannot_finish_after_it(store, write):
    claim = _claim(store)
    assert store.hold(claim, 600, "the outcome is unknown")
    before = store.read(KEY)
    assert FINISHING[write](store, claim) == REFUSED[write]
    assert store.read(KEY) == before


def test_a_completed_run_is_held_completed_with_its_stored_result(store, clock):
    claim = _claim(store)
    clock.advance(3)
    stored = StoredResult.of({"rows": [1, 2], "note": "é"})
    assert store.complete(claim, stored) == stored
    record = store.read(KEY)
    assert set(record) == CLAIMED | {"finished_at", "result_json", "result_stored"}
    assert record["status"] == "completed"
    assert (record["result_json"], record["result_stored"]) == (stored.text, True)
    finished = START + timedelta(seconds=3)
    assert (record["finished_at"], record["expire_at"]) == (finished, finished + RETENTION)
    clock.advance(LEASE.total_seconds())  # long after the lease: a finished run is never taken over
    held = store.claim(KEY, dict(FIELDS))
    assert isinstance(held, Held)
    assert (held.status, held.stored) == (RunStatus.COMPLETED, stored)
    assert held.result == {"rows": [1, 2], "note": "é"}


def test_a_completed_run_whose_result_was_not_stored_is_held_with_the_reason(store):
    stored = StoredResult.of({1, 2})
    assert store.complete(_claim(store), stored) == stored
    held = store.claim(KEY, dict(FIELDS))
    assert isinstance(held, Held) and held.stored == stored
    assert held.stored.answer() == {"result": None, "result_stored": False, "result_dropped": stored.dropped}


def test_a_failed_run_is_held_failed_with_its_error(store, clock):
    assert store.fail(_claim(store), "upstream refused: 400")
    clock.advance(LEASE.total_seconds())
    held = store.claim(KEY, dict(FIELDS))
    assert isinstance(held, Held)
    assert (held.status, held.error, held.result) == (RunStatus.FAILED, "upstream refused: 400", None)
    assert set(store.read(KEY)) == CLAIMED | {"finished_at", "error"}


def test_a_stored_error_is_cut_to_the_error_limit(store):
    assert store.fail(_claim(store), "x" * 10_000)
    error = store.read(KEY)["error"]
    assert len(error) <= 4096 and error.startswith("x" * 4000) and error.endswith("more characters cut]")


def test_a_released_run_has_no_record_and_its_next_claim_is_attempt_one(store):
    assert store.release(_claim(store))
    assert store.read(KEY) is None and not store.exists(KEY)
    assert _claim(store).attempt == 1


def test_a_held_claim_keeps_the_run_until_its_new_lease_ends_then_is_taken_over(store, clock):
    claim = _claim(store)
    assert store.hold(claim, 600, "the outcome is unknown")
    record = store.read(KEY)
    assert (record["lease_expires"], record["held_at"], record["held_reason"]) == (
        START + timedelta(seconds=600),
        START,
        "the outcome is unknown",
    )
    clock.advance(599)
    assert isinstance(store.claim(KEY, dict(FIELDS)), Held)
    clock.advance(1)
    assert _claim(store).attempt == 2


def test_a_repeated_finishing_write_of_one_claim_is_answered_done_and_changes_nothing(store):
    claim = _claim(store)
    first = StoredResult.of("first")
    assert store.complete(claim, first) == first
    before = store.read(KEY)
    assert store.complete(claim, StoredResult.of("second")) is not None
    assert store.read(KEY) == before


def test_read_and_exists_of_a_run_with_no_record(store):
    assert store.read("never-claimed") is None
    assert store.exists("never-claimed") is False


def test_read_and_exists_of_a_claimed_run(store):
    claim = _claim(store)
    assert store.exists(KEY) is True
    assert store.read(KEY)["attempt_id"] == claim.attempt_id


def test_annotate_adds_fields_to_a_finished_record(store):
    assert store.fail(_claim(store), "no")
    before = store.read(KEY)
    store.annotate(KEY, {"dead_lettered": True})
    assert store.read(KEY) == {**before, "dead_lettered": True}


def test_annotate_of_a_run_with_no_record_is_refused(store):
    with pytest.raises(StoreRejected):
        store.annotate("never-claimed", {"dead_lettered": True})


@pytest.fixture
def lose_next_answer(kind, tap, request) -> Callable[[], None]:
    """Let the next write land in the store and lose its answer (the store retries it)."""
    if kind == "memory":
        pytest.skip("an in-memory write and its answer are one function call: no answer can be lost")
    if kind == "valkey":
        return request.getfixturevalue("valkey_proxy").lose_next_answer
    return lambda: tap.inject(Fault("Commit", after_send=True))


@pytest.fixture
def writes(kind, tap, request) -> Callable[[], int]:
    """How many writes the store has sent: Firestore Commits, or calls of the Valkey functions
    that write."""
    if kind == "valkey":
        return request.getfixturevalue("valkey_proxy").writes
    return lambda: tap.calls["Commit"]


def test_a_claim_whose_answer_was_lost_is_recognised_as_ours(store, lose_next_answer, writes):
    lose_next_answer()
    claim = _claim(store)
    assert claim.attempt == 1 and writes() == 2
    assert store.read(KEY)["attempt_id"] == claim.attempt_id
    assert store.complete(claim, StoredResult.of("ok")) is not None


def test_a_takeover_whose_answer_was_lost_is_recognised_as_ours(store, clock, lose_next_answer):
    stale = _claim(store)
    clock.advance(LEASE.total_seconds())
    lose_next_answer()
    fresh = _claim(store)
    assert fresh.attempt == 2 and store.read(KEY)["attempt_id"] == fresh.attempt_id
    assert not store.fail(stale, "stale")
    assert store.complete(fresh, StoredResult.of("ok")) is not None


@pytest.mark.parametrize("write", FINISHING)
def test_a_finishing_write_whose_answer_was_lost_is_recognised_as_ours(
    store, lose_next_answer, write, writes
):
    claim = _claim(store)
    lose_next_answer()
    assert FINISHING[write](store, claim) not in (None, False)
    assert writes() == 3  # the claim, the write that landed, its retry refused by the fence
    record = store.read(KEY)
    expected = {"complete": "completed", "fail": "failed", "release": None, "hold": "in_progress"}[write]
    assert (record or {}).get("status") == expected


def test_a_record_read_or_claimed_is_the_stores_copy_changing_it_changes_nothing_stored(store):
    fields = {**FIELDS, "labels": {"team": "reports"}}
    assert isinstance(store.claim(KEY, fields), Claim)
    fields["labels"]["team"] = "changed by the caller"
    record = store.read(KEY)
    record["labels"]["team"] = "changed by a reader"
    record["status"] = "failed"
    again = store.read(KEY)
    assert (again["labels"], again["status"]) == ({"team": "reports"}, "in_progress")


# The operators' verbs (docs/operate.md): release, amend, batched reads and finds.

ACTION = {"action": "release", "by": "operator@example.com", "at": START, "detail": {}}


def test_release_held_ends_an_expired_lease_records_the_action_and_the_next_claim_takes_over(store, clock):
    stale = _claim(store)
    clock.advance(LEASE.total_seconds() + 1)
    written = store.release_held(KEY, stale.attempt_id, ACTION)
    assert isinstance(written, dict)
    record = store.read(KEY)
    assert record["lease_expires"] == START + LEASE + timedelta(seconds=1)
    assert record[ACTIONS_FIELD] == [ACTION]
    assert record["status"] == "in_progress" and record["attempt_id"] == stale.attempt_id
    assert store.complete(stale, StoredResult.of(1)) is None  # the release moved the fence
    fresh = _claim(store)
    assert fresh.attempt == 2
    assert store.read(KEY)[ACTIONS_FIELD] == [ACTION]


def test_release_held_refuses_a_live_lease_unless_forced_and_the_refusal_writes_nothing(store, clock):
    claim = _claim(store)
    before = store.read(KEY)
    assert store.release_held(KEY, claim.attempt_id, ACTION) is Refusal.LEASE_LIVE
    assert store.read(KEY) == before
    assert isinstance(store.release_held(KEY, claim.attempt_id, ACTION, force=True), dict)
    assert store.read(KEY)["lease_expires"] == START
    assert isinstance(store.claim(KEY, dict(FIELDS)), Claim)


def test_release_held_refuses_when_another_attempt_took_the_run_over_since_the_operator_looked(store, clock):
    stale = _claim(store)
    clock.advance(LEASE.total_seconds())
    seen = store.read(KEY)  # the operator looks: attempt 1, lease ended
    fresh = _claim(store)  # a live delivery takes it over before the operator releases it
    before = store.read(KEY)
    assert store.release_held(KEY, seen["attempt_id"], ACTION, force=True) is Refusal.TAKEN_OVER
    assert store.read(KEY) == before
    assert fresh.attempt_id != stale.attempt_id
    assert store.complete(fresh, StoredResult.of(1)) is not None  # the live attempt still holds it


def test_release_held_refuses_a_finished_run_and_a_run_with_no_record(store):
    claim = _claim(store)
    assert store.fail(claim, "bad input")
    before = store.read(KEY)
    assert store.release_held(KEY, claim.attempt_id, ACTION, force=True) is Refusal.NOT_IN_PROGRESS
    assert store.read(KEY) == before
    assert store.release_held("no-such-run", claim.attempt_id, ACTION, force=True) is Refusal.NO_RECORD
    assert store.read("no-such-run") is None


def test_amend_creates_a_missing_record_and_a_refusal_writes_nothing(store):
    def refuse_existing(record):
        return Refusal.REPLAYED if record else {"note": "first", ACTIONS_FIELD: [ACTION]}

    assert store.amend("replay-record", refuse_existing) == {"note": "first", ACTIONS_FIELD: [ACTION]}
    assert store.read("replay-record") == {"note": "first", ACTIONS_FIELD: [ACTION]}
    assert store.amend("replay-record", refuse_existing) is Refusal.REPLAYED
    assert store.read("replay-record") == {"note": "first", ACTIONS_FIELD: [ACTION]}


def test_a_run_recorded_excluded_is_held_finished_and_found_by_its_job(store, clock):
    # The handler records a run its job's calendar excludes through amend (one store call); a later
    # delivery that claims it (a forced run taken for the scheduled one) must not run it.
    excluded = {
        **FIELDS,
        "status": RunStatus.EXCLUDED.value,
        EXCLUDED_BECAUSE_FIELD: "excluded_date",
        "attempts": 0,
        "claimed_at": START,
        "finished_at": START,
        "expire_at": START + RETENTION,
    }
    assert store.amend(KEY, lambda record: excluded if record is None else Refusal.RECORDED) == excluded
    assert (
        store.amend(KEY, lambda record: excluded if record is None else Refusal.RECORDED) is Refusal.RECORDED
    )
    held = store.claim(KEY, dict(FIELDS))
    assert isinstance(held, Held) and held.status is RunStatus.EXCLUDED
    assert store.read(KEY)[EXCLUDED_BECAUSE_FIELD] == "excluded_date"
    assert set(store.find({"job": "nightly-report"}, START)) == {KEY}


def test_read_many_and_find_by_fields_and_claim_time(store, clock):
    _claim(store, "run-a")
    clock.advance(60)
    store.claim("run-b", {**FIELDS, "forced": True})
    store.claim("run-c", {**FIELDS, "job": "other"})
    assert set(store.read_many(["run-a", "run-b", "run-x"])) == {"run-a", "run-b"}
    many = [f"absent-{number}" for number in range(700)] + ["run-c"]  # more than one batch of the ledger
    assert list(store.read_many(many)) == ["run-c"]
    assert set(store.find({"job": "nightly-report"})) == {"run-a", "run-b"}
    assert set(store.find({"job": "nightly-report", "forced": True})) == {"run-b"}
    assert set(store.find({"job": "nightly-report"}, START + timedelta(seconds=30))) == {"run-b"}
    assert store.find({"job": "nobody"}) == {}
    store.amend("never-claimed", lambda record: {"job": "nightly-report"})
    assert set(store.find({"job": "nightly-report"})) == {"run-a", "run-b", "never-claimed"}
    assert set(store.find({"job": "nightly-report"}, START)) == {"run-a", "run-b"}
