"""The Valkey store against the in-memory store, step by step: hypothesis drives both with the
same interleaving of claims (plain, and with a `skip` or `wait` job lock), locks taken after a
claim, finishing writes by live and stale attempts, operators' releases, re-run requests and the
forced deliveries that consume them, and a clock that moves past leases; after every step both
must have answered alike and hold alike records (attempt and request ids mapped one to one).
Every divergence is a bug in one of them. `make test` runs a fixed (derandomized) 300 examples
of up to 60 steps; RUNONCE_DIFFERENTIAL_EXAMPLES and RUNONCE_DIFFERENTIAL_STEPS ask for more.
Random steps reach deep sequences rarely: the skip that kept an ended claim's token
(test_conformance_overlap.py) takes five chosen steps: these 300 examples find it, 100 do not.
The conformance suite pins such cases down."""

from __future__ import annotations

import os
from datetime import timedelta
from typing import Any

import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import Bundle, RuleBasedStateMachine, initialize, invariant, rule

from runonce.contract import Overlap
from runonce.core.requests import RerunRefused, RerunRequest
from runonce.core.store import Claim, Held, JobLock, Overlapped, Refusal, Rerun, StoredResult
from runonce.store.memory import MemoryStore
from tests.conftest import SCHEDULED, ManualClock

LEASE = timedelta(seconds=120)
RETENTION = timedelta(days=7)
RUNS = ["run-a", "run-b"]
LOCK = "lock-nightly"
SLOT = "rerun-nightly"
FORCED = ["forced-1", "forced-2"]
EXAMPLES = int(os.environ.get("RUNONCE_DIFFERENTIAL_EXAMPLES", "300"))
STEPS = int(os.environ.get("RUNONCE_DIFFERENTIAL_STEPS", "60"))
ACTION = {"action": "release", "by": "operator@example.com", "detail": {}}


class Differential(RuleBasedStateMachine):
    """One memory store and one Valkey store, on one manual clock."""

    make_valkey: Any = None
    claims = Bundle("claims")

    def __init__(self):
        super().__init__()
        self.clock = ManualClock(SCHEDULED)
        self.memory = MemoryStore(LEASE, RETENTION, self.clock)
        self.valkey = self.make_valkey(LEASE, RETENTION, self.clock)
        self.same: dict[str, str] = {}  # memory's attempt id -> valkey's
        self.policy = Overlap.ALLOW

    @initialize(policy=st.sampled_from(list(Overlap)))
    def job(self, policy):
        """The job's overlap policy, as a stack gives it to every delivery of the job."""
        self.policy = policy

    def _both(self, call):
        return call(self.memory), call(self.valkey)

    def _seen(self, mine: object, theirs: object) -> None:
        if isinstance(mine, Claim) and isinstance(theirs, Claim):
            self.same[mine.attempt_id] = theirs.attempt_id

    def _shape(self, answer: object, mapped: bool = False) -> object:
        if isinstance(answer, Claim):
            return ("claim", answer.key, answer.attempt, answer.reopened, answer.lock)
        if isinstance(answer, Held):
            return ("held", answer.key, answer.status, answer.error, answer.lease_expires, answer.stored)
        if isinstance(answer, Overlapped):
            return ("overlap", answer.key, answer.policy, answer.holder, answer.lease_expires)
        if isinstance(answer, Rerun):
            return ("rerun", answer.key, answer.schedule_time, answer.cause, self._shape(answer.claim))
        if isinstance(answer, RerunRequest):
            return (
                "request",
                answer.slot,
                answer.key,
                answer.schedule_time,
                answer.by,
                answer.at,
                answer.expires,
            )
        if isinstance(answer, dict):
            return self._mapped(answer) if mapped else answer
        return answer

    def _mapped(self, value: Any) -> Any:
        """`value` with memory's attempt ids written as valkey's."""
        if isinstance(value, dict):
            return {name: self._mapped(item) for name, item in value.items()}
        if isinstance(value, list):
            return [self._mapped(item) for item in value]
        if isinstance(value, str):
            for mine, theirs in self.same.items():  # ids appear inside operators' action details too
                value = value.replace(mine, theirs)
        return value

    def _alike(self, mine: object, theirs: object) -> None:
        self._seen(mine, theirs)
        assert self._shape(mine, mapped=True) == self._shape(theirs), (mine, theirs)

    @rule(target=claims, run=st.sampled_from(RUNS))
    def claim(self, run):
        fields = {"job": "nightly", "schedule_time": run, "forced": False}
        if self.policy is Overlap.ALLOW:
            mine, theirs = self._both(lambda store: store.claim(run, dict(fields)))
        else:
            lock = JobLock(LOCK, self.policy)
            mine, theirs = self._both(lambda store: store.claim_locked(run, dict(fields), lock))
        self._alike(mine, theirs)
        return (mine, theirs) if isinstance(mine, Claim) else None

    @rule(pair=claims, policy=st.sampled_from([Overlap.SKIP, Overlap.WAIT]))
    def take_lock(self, pair, policy):
        if pair is None or pair[0].lock is not None:
            return
        lock = JobLock(LOCK, policy)
        mine, theirs = pair[0], pair[1]
        self._alike(self.memory.take_lock(mine, lock), self.valkey.take_lock(theirs, lock))

    @rule(pair=claims, write=st.sampled_from(["complete", "fail", "release", "hold"]))
    def finish(self, pair, write):
        if pair is None:
            return
        mine, theirs = pair
        calls = {
            "complete": lambda store, claim: store.complete(claim, StoredResult.of({"rows": 1})),
            "fail": lambda store, claim: store.fail(claim, "upstream refused"),
            "release": lambda store, claim: store.release(claim),
            "hold": lambda store, claim: store.hold(claim, 300, "the outcome is unknown"),
        }
        self._alike(calls[write](self.memory, mine), calls[write](self.valkey, theirs))

    @rule(pair=claims, force=st.booleans())
    def release_held(self, pair, force):
        if pair is None:
            return
        mine, theirs = pair
        action = {**ACTION, "at": self.clock()}
        answer = self.memory.release_held(mine.key, mine.attempt_id, action, force)
        other = self.valkey.release_held(theirs.key, theirs.attempt_id, action, force)
        assert isinstance(answer, Refusal) == isinstance(other, Refusal)
        self._alike(answer, other)

    @rule(run=st.sampled_from(RUNS), insist=st.booleans())
    def request_rerun(self, run, insist):
        fields = {"by": "ops@example.com", "schedule_time": "2026-11-29T03:00:00Z"}
        answers: list[object] = []
        for store in (self.memory, self.valkey):
            try:
                answers.append(store.request_rerun(SLOT, run, dict(fields), insist, timedelta(minutes=10)))
            except RerunRefused as exc:
                answers.append((type(exc), str(exc)))
        mine, theirs = answers
        if isinstance(mine, RerunRequest) and isinstance(theirs, RerunRequest):
            self.same[mine.request_id] = theirs.request_id
        assert self._shape(mine) == self._shape(theirs), (mine, theirs)

    @rule(target=claims, forced=st.sampled_from(FORCED))
    def take_rerun(self, forced):
        fields = {"job": "nightly", "schedule_time": "2026-11-30T03:00:00Z", "forced": True}
        mine, theirs = self._both(lambda store: store.take_rerun(SLOT, forced, dict(fields)))
        if isinstance(mine, Rerun) and isinstance(theirs, Rerun):
            self._seen(mine.claim, theirs.claim)
        assert self._shape(mine) == self._shape(theirs), (mine, theirs)
        if isinstance(mine, Rerun) and mine.claim is not None and isinstance(theirs, Rerun):
            return (mine.claim, theirs.claim)
        return None

    @rule(seconds=st.sampled_from([60, 120, 301]))
    def advance(self, seconds):
        self.clock.advance(seconds)

    @invariant()
    def records_alike(self):
        for key in [*RUNS, LOCK, SLOT, *FORCED]:
            assert self._mapped(self.memory.read(key)) == self.valkey.read(key), key


@pytest.fixture
def differential(valkey_store):
    Differential.make_valkey = staticmethod(valkey_store)
    yield Differential
    Differential.make_valkey = None


def test_the_valkey_store_answers_and_records_as_the_memory_store_does_step_by_step(differential):
    from hypothesis.stateful import run_state_machine_as_test

    run_state_machine_as_test(
        differential,
        settings=settings(max_examples=EXAMPLES, stateful_step_count=STEPS, deadline=None, derandomize=True),
    )
