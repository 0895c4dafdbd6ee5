"""Every store against one model of the protocol (`tests/store/model.py`), step by step.

hypothesis' stateful testing drives a store (in-memory, the Firestore ledger on the emulator, the
Valkey store on a real server) and the model with the same interleaving: claims of several runs of
one job, plain and with a `skip` or `wait` job lock (a job's overlap policy changes between
deploys), locks taken after a claim, finishing writes (complete, fail, release, hold) by live and
stale attempts, operators' releases, re-run requests and the forced deliveries that consume them,
a clock that moves past leases, and (on the remote stores) writes whose answer is lost. After every
step the store must have answered as the model does and hold the records the model holds, and the
model's invariants must hold. Every divergence is a bug in the store or in the model.

`make test` runs a fixed (derandomized) number of examples per store; RUNONCE_MODEL_EXAMPLES and
RUNONCE_MODEL_STEPS ask for more (docs/library.md, "The model").
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule, run_state_machine_as_test

import runonce
from emulator.wire import Fault, TappedClient, WireTap
from runonce.contract import ACTIONS_FIELD, HISTORY_FIELD, SKIPPED_FOR_FIELD, Overlap
from runonce.core.errors import StoreUnavailable
from runonce.core.requests import RequestPending, RerunRefused
from runonce.core.store import Claim, Held, JobLock, Overlapped, Refusal, Rerun, Store, StoredResult
from runonce.store._records import LOCK_ATTEMPT_FIELD, LOCK_HOLDER_FIELD
from runonce.store.memory import MemoryStore
from tests.conftest import PROJECT, SCHEDULED, ManualClock
from tests.store.model import COMPLETED, FAILED, Attempt, Model, Policy
from tests.store.test_conformance import kind as kind  # the conformance suite's fixtures
from tests.store.test_conformance import lose_next_answer as lose_next_answer
from tests.store.test_conformance import store as store
from tests.store.test_conformance import tap as tap

LEASE = timedelta(seconds=120)
RETENTION = timedelta(days=7)
TTL = timedelta(minutes=10)
JOB = "nightly"
RUNS = [f"{JOB}-run-a", f"{JOB}-run-b"]
LOCK = "lock-nightly"
SLOT = "rerun-nightly"
FORCED = ["forced-1", "forced-2"]
EXAMPLES = int(os.environ.get("RUNONCE_MODEL_EXAMPLES", "0"))
STEPS = int(os.environ.get("RUNONCE_MODEL_STEPS", "40"))
DEFAULT_EXAMPLES = {"memory": 400, "valkey": 500, "firestore": 60}
"""Per store, in `make test`: the whole module under about a minute per store on a loaded machine."""
ACTION = {"action": "release", "by": "operator@example.com", "detail": {}}
POLICIES = {None: None, Overlap.SKIP: Policy.SKIP, Overlap.WAIT: Policy.WAIT}
LOCKED = [Overlap.SKIP, Overlap.WAIT]


class Checked(RuleBasedStateMachine):
    """One store and the model, on one manual clock. The fixture sets `make_store` (a store on a
    clock) and `lose` (None, or arm the loss of the next answer of the store function named)."""

    make_store: Any = None
    lose: Any = None
    disarm: Any = None
    unknown_when_lost = False
    """Whether a transaction whose commit's answer was lost may fail as StoreUnavailable (written
    or not, as the model says), instead of answering: the Firestore client's transactions."""

    def __init__(self):
        super().__init__()
        self.clock = ManualClock(SCHEDULED)
        self.store: Store = self.make_store(self.clock)
        self.model = Model(LEASE, SCHEDULED)
        self.ids: dict[int, str] = {}  # the model's attempt seq -> the store's attempt id
        self.claims: list[tuple[Attempt, Claim]] = []

    # Answers, in the model's shapes.

    def _answer(self, answer: object) -> tuple:
        if isinstance(answer, Claim):
            return ("claim", answer.key, answer.attempt, answer.reopened, answer.lock)
        if isinstance(answer, Held):
            return ("held", answer.status.value, answer.lease_expires, answer.skipped_for)
        if isinstance(answer, Overlapped):
            return ("overlap", answer.policy.value, answer.holder, answer.lease_expires)
        raise AssertionError(f"not a claim's answer: {answer!r}")

    def _expected(self, modelled: tuple) -> tuple:
        if modelled[0] == "claim":
            attempt = modelled[1]
            return ("claim", attempt.key, attempt.number, attempt.reopened, attempt.lock)
        if modelled[0] == "overlap":
            return ("overlap", modelled[1].value, *modelled[2:])
        return modelled

    def _claimed(self, modelled: tuple, answer: Any) -> None:
        """Compare a claim's answer with the model's; keep the claim for later steps."""
        assert self._answer(answer) == self._expected(modelled), (answer, modelled)
        if modelled[0] == "claim":
            attempt = modelled[1]
            assert self.ids.setdefault(attempt.seq, answer.attempt_id) == answer.attempt_id
            self.claims.append((attempt, answer))

    def _pick(self, index: int) -> tuple[Attempt, Claim] | None:
        return self.claims[-1 - index % len(self.claims)] if self.claims else None

    def _arm(self, lose: bool, function: str) -> None:
        if lose and self.lose is not None:
            self.lose(function)

    # The steps.

    # Deliveries are the common step: a plain claim and a locked one are two rules, so that each is
    # drawn as often as any other step.

    @rule(run=st.sampled_from(RUNS), lose=st.booleans())
    def plain_claim(self, run, lose):
        self._deliver(run, None, lose)

    @rule(run=st.sampled_from(RUNS), overlap=st.sampled_from(LOCKED), lose=st.booleans())
    def locked_claim(self, run, overlap, lose):
        self._deliver(run, overlap, lose)

    def _deliver(self, run: str, overlap: Overlap | None, lose: bool) -> None:
        """A delivery of `run` claims it (with the job lock under `overlap`), on the store and the model."""
        fields = {"job": JOB, "schedule_time": run, "forced": False}
        self._arm(lose, "claim")
        if overlap is None:
            answer: object = self.store.claim(run, dict(fields))
        else:
            answer = self.store.claim_locked(run, dict(fields), JobLock(LOCK, overlap))
        finished = run in self.model.finished_runs
        modelled = self.model.claim(run, LOCK if overlap else None, POLICIES[overlap])
        assert not (finished and isinstance(answer, Claim)), f"finished run {run} claimed again"
        if lose and self.lose is not None and modelled[:2] == ("overlap", Policy.SKIP):
            # A skip's record names no attempt, so the resend after the lost answer finds the run
            # skipped and is told so as a duplicate is (the same record; both answered 200).
            skipped = ("held", "skipped", self.model.runs[run].lease_expires, modelled[2])
            if isinstance(answer, Held) and self._answer(answer) == skipped:
                return
        self._claimed(modelled, answer)

    @rule(index=st.integers(0, 3), overlap=st.sampled_from(LOCKED), lose=st.booleans())
    def take_lock(self, index, overlap, lose):
        picked = self._pick(index)
        if picked is None or picked[0].lock is not None:
            return
        attempt, claim = picked
        self._arm(lose, "take_lock")
        answer = self.store.take_lock(claim, JobLock(LOCK, overlap))
        self._claimed(self.model.take_lock(attempt, LOCK, POLICIES[overlap]), answer)

    @rule(
        index=st.integers(0, 3),
        write=st.sampled_from(["complete", "fail", "release", "hold"]),
        lose=st.booleans(),
    )
    def finish(self, index, write, lose):
        picked = self._pick(index)
        if picked is None:
            return
        attempt, claim = picked
        if write == "complete":
            self._arm(lose, "finish")
            answer = self.store.complete(claim, StoredResult.of({"rows": 1})) is not None
            expected = self.model.finish(attempt, COMPLETED)
        elif write == "fail":
            self._arm(lose, "finish")
            answer = self.store.fail(claim, "upstream refused")
            expected = self.model.finish(attempt, FAILED)
        elif write == "release":
            self._arm(lose, "finish" if claim.reopened else "release")
            answer = self.store.release(claim)
            expected = self.model.release(attempt)
        else:
            self._arm(lose, "finish")
            answer = self.store.hold(claim, 300, "the outcome is unknown")
            expected = self.model.hold(attempt, 300)
        assert answer == expected, (write, attempt, answer, expected)

    @rule(index=st.integers(0, 3), force=st.booleans(), lose=st.booleans())
    def release_held(self, index, force, lose):
        picked = self._pick(index)
        if picked is None:
            return
        attempt, claim = picked
        refused = self.model.release_held(attempt.key, attempt.seq, force)
        lost = lose and refused is None and self.lose is not None  # only a transaction that writes commits
        self._arm(lost, "commit")
        action = {**ACTION, "at": self.clock()}
        try:
            answer = self.store.release_held(claim.key, claim.attempt_id, action, force)
        except StoreUnavailable:
            assert lost and self.unknown_when_lost, "an operator's release failed with no answer lost"
            return
        assert (answer.value if isinstance(answer, Refusal) else None) == refused, (answer, refused)

    @rule(run=st.sampled_from(RUNS), insist=st.booleans())
    def request_rerun(self, run, insist):
        fields = {"by": "ops@example.com", "schedule_time": "2026-11-29T03:00:00Z"}
        try:
            self.store.request_rerun(SLOT, run, fields, insist, TTL)
            answer = "pending"
        except RequestPending:
            answer = "request_pending"
        except RerunRefused:
            answer = "refused"
        assert answer == self.model.request_rerun(SLOT, run, insist, TTL)

    @rule(forced=st.sampled_from(FORCED), lose=st.booleans())
    def take_rerun(self, forced, lose):
        fields = {"job": JOB, "schedule_time": "2026-11-30T03:00:00Z", "forced": True}
        commits = self.model.commits
        modelled = self.model.take_rerun(SLOT, forced)
        lost = lose and self.model.commits > commits and self.lose is not None
        self._arm(lost, "commit")
        try:
            answer = self.store.take_rerun(SLOT, forced, fields)
        except StoreUnavailable:
            assert lost and self.unknown_when_lost, "a forced delivery failed with no answer lost"
            if modelled is not None and modelled[2] is not None:  # the reopened run's claim, never handed out
                self.ids[modelled[2].seq] = self.store.read(modelled[2].key)["attempt_id"]
            return
        if modelled is None or answer is None:
            assert answer is modelled is None, (answer, modelled)
            return
        assert isinstance(answer, Rerun) and answer.key == modelled[1], (answer, modelled)
        if modelled[2] is None:
            assert answer.claim is None, answer
        else:
            self._claimed(("claim", modelled[2]), answer.claim)

    @rule(seconds=st.sampled_from([30, 120, 301]))
    def advance(self, seconds):
        self.clock.advance(seconds)
        self.model.advance(seconds)

    # After every step.

    @invariant()
    def the_model_keeps_its_promises(self):
        assert self.model.violations({LOCK: f"{JOB}-run-"}) == []

    @invariant()
    def the_store_holds_what_the_model_holds(self):
        if self.disarm is not None:
            self.disarm()  # a loss armed for a step that sent no write is not carried to the next
        records = self.store.read_many([*RUNS, LOCK, SLOT, *FORCED])
        for key in RUNS:
            run = self.model.runs.get(key)
            record = records.get(key)
            if run is None:
                assert record is None, (key, record)
                continue
            assert record is not None, (key, run)
            seen = (
                record["status"],
                record.get("attempt_id"),
                record["attempts"],
                record.get("lease_expires"),
                record.get(SKIPPED_FOR_FIELD),
                len(record.get(HISTORY_FIELD, [])),
            )
            expected = (
                run.status,
                self.ids.get(run.attempt) if run.attempt is not None else None,
                run.attempts,
                run.lease_expires,
                run.skipped_for,
                run.reopened,
            )
            assert seen == expected, key
        held = self.model.locks.get(LOCK)
        lock = records.get(LOCK)
        if held is None:
            assert lock is None, lock
        else:
            assert lock is not None, held
            seen = (lock[LOCK_HOLDER_FIELD], lock[LOCK_ATTEMPT_FIELD], lock["lease_expires"])
            assert seen == (held.holder, self.ids[held.attempt], held.lease_expires), LOCK
        request = self.model.slots.get(SLOT)
        slot = records.get(SLOT)
        seen_slot = (slot["rerun_key"], slot["rerun_state"]) if slot else None
        assert seen_slot == ((request.key, request.state) if request else None), SLOT
        for forced in FORCED:
            carried = self.model.delivered.get(forced)
            assert (records[forced]["rerun_of"] if forced in records else None) == carried, forced


def _run(machine: type[Checked], kind: str) -> None:
    examples = EXAMPLES or DEFAULT_EXAMPLES[kind]
    run_state_machine_as_test(
        machine,
        settings=settings(max_examples=examples, stateful_step_count=STEPS, deadline=None, derandomize=True),
    )


def _machine(
    make_store: Callable[[ManualClock], Store],
    lose: Callable[[str], None] | None = None,
    disarm: Callable[[], None] | None = None,
    unknown_when_lost: bool = False,
) -> type[Checked]:
    """The machine on one kind of store (`lose`: how to lose an answer there; `disarm`: how to
    forget a loss that was armed and not spent)."""
    methods: dict[str, Any] = {
        name: staticmethod(f) if f else None
        for name, f in (("make_store", make_store), ("lose", lose), ("disarm", disarm))
    }
    methods["unknown_when_lost"] = unknown_when_lost
    return type("CheckedStore", (Checked,), methods)


@pytest.mark.fast
def test_the_memory_store_answers_and_records_as_the_model_does():
    _run(_machine(lambda clock: MemoryStore(LEASE, RETENTION, clock), None), "memory")


def test_the_valkey_store_answers_and_records_as_the_model_does_lost_answers_included(
    valkey_store, valkey_proxy
):
    _run(
        _machine(lambda clock: valkey_store(LEASE, RETENTION, clock), valkey_proxy.lose_next_answer), "valkey"
    )


def test_the_firestore_ledger_answers_and_records_as_the_model_does_lost_answers_included(firestore_emulator):
    from runonce.store.firestore import Ledger, LedgerStore

    wire = WireTap()
    client = TappedClient(wire, project=PROJECT)

    def make(clock: ManualClock) -> Store:
        runonce.set_clock(clock)  # the ledger reads runonce's clock
        wire.reset()
        return LedgerStore(Ledger(client, f"model_{uuid.uuid4().hex[:12]}", LEASE, RETENTION))

    def lose(function: str) -> None:
        wire.inject(Fault("Commit", after_send=True))

    try:
        _run(_machine(make, lose, wire.reset, unknown_when_lost=True), "firestore")
    finally:
        runonce.set_clock(None)


# What the model found, pinned down as fixed steps on every store (lost answers on the remote ones).


@pytest.mark.parametrize("overlap", [Overlap.SKIP, Overlap.WAIT])
def test_a_take_lock_that_overlapped_and_lost_its_answer_is_told_overlapped_when_sent_again(
    store, lose_next_answer, overlap
):
    fields = {"job": JOB, "forced": False}
    holder = store.claim_locked(RUNS[1], {**fields, "schedule_time": RUNS[1]}, JobLock(LOCK, overlap))
    claim = store.claim(RUNS[0], {**fields, "schedule_time": RUNS[0]})
    assert isinstance(holder, Claim) and isinstance(claim, Claim)
    lose_next_answer()
    answer = store.take_lock(claim, JobLock(LOCK, overlap))
    assert isinstance(answer, Overlapped), answer
    assert (answer.holder, answer.policy) == (RUNS[1], overlap)
    record = store.read(RUNS[0])
    assert record["status"] == ("skipped" if overlap is Overlap.SKIP else "in_progress")


def test_a_lock_taken_twice_with_the_same_claim_is_refused_the_second_time_by_the_fence(store):
    claim = store.claim(RUNS[0], {"job": JOB, "forced": False, "schedule_time": RUNS[0]})
    assert isinstance(claim, Claim)
    taken = store.take_lock(claim, JobLock(LOCK, Overlap.SKIP))
    assert isinstance(taken, Claim) and taken.lock == LOCK
    again = store.take_lock(claim, JobLock(LOCK, Overlap.SKIP))
    assert isinstance(again, Held) and again.status.value == "in_progress", again
    assert store.complete(taken, StoredResult.of(1)) is not None


def test_a_lock_taken_twice_with_the_same_claim_is_refused_by_the_fence_when_the_second_answer_is_lost(
    store, lose_next_answer
):
    claim = store.claim(RUNS[0], {"job": JOB, "forced": False, "schedule_time": RUNS[0]})
    assert isinstance(claim, Claim)
    taken = store.take_lock(claim, JobLock(LOCK, Overlap.SKIP))
    assert isinstance(taken, Claim)
    lose_next_answer()
    again = store.take_lock(claim, JobLock(LOCK, Overlap.SKIP))
    assert isinstance(again, Held) and again.status.value == "in_progress", again


def test_a_holder_taken_over_by_another_attempt_frees_the_job_lock_its_earlier_attempt_took(store):
    """docs/schedules/overlap.md: a holder taken over by another attempt frees the lock, whatever the lock's
    own lease says (here an operator ended the first attempt's lease, not the lock's)."""
    fields = {"job": JOB, "forced": False}
    first = store.claim_locked(RUNS[1], {**fields, "schedule_time": RUNS[1]}, JobLock(LOCK, Overlap.SKIP))
    assert isinstance(first, Claim)
    released = store.release_held(RUNS[1], first.attempt_id, ACTION, force=True)
    assert isinstance(released, dict)
    takeover = store.claim(RUNS[1], {**fields, "schedule_time": RUNS[1]})  # its job's policy was allow now
    assert isinstance(takeover, Claim) and takeover.attempt == 2
    other = store.claim_locked(RUNS[0], {**fields, "schedule_time": RUNS[0]}, JobLock(LOCK, Overlap.SKIP))
    assert isinstance(other, Claim) and other.lock == LOCK, other


def test_an_operators_release_whose_commit_answer_was_lost_is_written_and_never_called_rejected(
    store, kind, lose_next_answer
):
    """Valkey recognises its own transaction's write; the Firestore client sends the commit again
    into a closed transaction, so its outcome is unknown: StoreUnavailable, not StoreRejected."""
    claim = store.claim(RUNS[0], {"job": JOB, "forced": False, "schedule_time": RUNS[0]})
    assert isinstance(claim, Claim)
    lose_next_answer()
    if kind == "firestore":
        with pytest.raises(StoreUnavailable, match="outcome is unknown"):
            store.release_held(RUNS[0], claim.attempt_id, ACTION, force=True)
    else:
        assert isinstance(store.release_held(RUNS[0], claim.attempt_id, ACTION, force=True), dict)
    record = store.read(RUNS[0])
    assert record is not None and record[ACTIONS_FIELD] == [ACTION]
