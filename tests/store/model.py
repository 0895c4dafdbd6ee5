"""The run store's protocol as one executable model: what every `Store` must answer and keep.

Plain Python, no store code: derived from docs/library.md (claims, leases, fencing), docs/schedules/overlap.md
(the job lock) and docs/rerun.md (the re-run slot). The model holds the state of each run (in
progress under a lease, completed, failed or skipped; or no record), each job lock, each re-run
slot and each forced delivery that consumed a request, and one commit counter standing for a
store's update time: every write takes the next commit, and a claim is fenced by the commit it
last wrote. `tests/store/test_model.py` drives a real store and this model with the same steps
and asks the same answers and the same records of both.

Attempts are numbered by the model (`Attempt.seq`); the test maps each to the attempt id the store
chose. The invariants (`Model.violations`) are the promises themselves:
- at most one live holder per run (a claim whose fence is current under a live lease), and per
  job lock at most one run whose current attempt took the lock under a live lease;
- a finished run is never claimed again (only a re-run reopens it);
- a stale attempt's write is refused (checked by the answers and records the test compares);
- a lock and its holder agree: the lock names its holder's current attempt and lease while that
  attempt's claim is current.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from enum import Enum

IN_PROGRESS, COMPLETED, FAILED, SKIPPED = "in_progress", "completed", "failed", "skipped"
FINISHED = (COMPLETED, FAILED, SKIPPED)


class Policy(str, Enum):
    """What a run of a locked job does when another run holds the job's lock."""

    SKIP = "skip"
    WAIT = "wait"


@dataclass
class Run:
    """A run's record."""

    status: str
    attempt: int | None
    """The `seq` of the attempt that last claimed it (None: skipped at its first delivery)."""
    attempts: int
    lease_expires: datetime | None
    commit: int
    reopened: int = 0
    """How many times a re-run reopened it (its history's length)."""
    skipped_for: str | None = None
    locked_by: int | None = None
    """The `seq` of the attempt that took the job lock with this run, if that attempt holds it."""


@dataclass
class Lock:
    """A job lock's record: the run and attempt that took it, under that attempt's lease."""

    holder: str
    attempt: int
    lease_expires: datetime
    commit: int


@dataclass(frozen=True)
class Attempt:
    """A claim as the store hands it to an attempt: its run, its fence, and the lock it holds."""

    seq: int
    key: str
    number: int
    commit: int
    reopened: bool
    lock: str | None = None


@dataclass
class Request:
    """A re-run slot's record: a request to re-run run `key`."""

    number: int
    key: str
    state: str
    expires: datetime


@dataclass
class Model:
    """Every run, lock, slot and forced delivery of one store, on a clock the test moves."""

    lease: timedelta
    now: datetime
    runs: dict[str, Run] = field(default_factory=dict)
    locks: dict[str, Lock] = field(default_factory=dict)
    slots: dict[str, Request] = field(default_factory=dict)
    delivered: dict[str, str] = field(default_factory=dict)
    """Forced delivery key -> the run whose re-run it carried."""
    commits: int = 0
    attempts: int = 0
    requests: int = 0
    finished_runs: set[str] = field(default_factory=set)
    """Runs that finished and were not reopened since: never claimed again."""

    # The clock.

    def advance(self, seconds: float) -> None:
        """Move the clock `seconds` on."""
        self.now += timedelta(seconds=seconds)

    def _live(self, lease: datetime | None) -> bool:
        return lease is None or lease > self.now

    def _commit(self) -> int:
        self.commits += 1
        return self.commits

    def _attempt(self) -> int:
        self.attempts += 1
        return self.attempts

    # Claims.

    def claim(self, key: str, lock: str | None = None, policy: Policy | None = None) -> tuple:
        """A delivery of run `key` claims it (with the job lock `lock` under `policy`): ('claim',
        Attempt), ('held', status, lease_expires, skipped_for) or ('overlap', policy, holder,
        lease_expires)."""
        run = self.runs.get(key)
        if run is not None and (run.status != IN_PROGRESS or self._live(run.lease_expires)):
            return ("held", run.status, run.lease_expires, run.skipped_for)
        if lock is not None:
            assert policy is not None
            rival = self._rival(lock, key)
            if rival is not None:
                return self._overlap(key, run, lock, policy, rival)
        commit, seq = self._commit(), self._attempt()
        lease = self.now + self.lease
        if run is None:
            run = self.runs[key] = Run(IN_PROGRESS, seq, 1, lease, commit)
        else:
            run.attempt, run.attempts, run.lease_expires, run.commit = seq, run.attempts + 1, lease, commit
        run.locked_by = seq if lock is not None else None
        if lock is not None:
            self._lock(lock, Lock(key, seq, lease, commit))
        return ("claim", Attempt(seq, key, run.attempts, commit, run.reopened > 0, lock))

    def _lock(self, lock: str, held: Lock) -> None:
        """The job lock `lock` written for its new holder; the run that held it before no longer does."""
        before = self.locks.get(lock)
        if before is not None and before.holder in self.runs and before.holder != held.holder:
            self.runs[before.holder].locked_by = None
        self.locks[lock] = held

    def _rival(self, lock: str, key: str) -> str | None:
        """The run that holds the job lock against run `key` (docs/schedules/overlap.md: a holder that
        finished, was taken over by another attempt, or whose lease ended frees it)."""
        held = self.locks.get(lock)
        if held is None or held.holder == key or not self._live(held.lease_expires):
            return None
        holder = self.runs.get(held.holder)
        if (
            holder is not None
            and holder.status == IN_PROGRESS
            and holder.attempt == held.attempt
            and self._live(holder.lease_expires)
        ):
            return held.holder
        return None

    def _overlap(self, key: str, run: Run | None, lock: str, policy: Policy, rival: str) -> tuple:
        if policy is Policy.SKIP:
            commit = self._commit()
            if run is None:
                self.runs[key] = Run(SKIPPED, None, 0, None, commit, skipped_for=rival)
            else:
                run.status, run.skipped_for, run.commit, run.locked_by = SKIPPED, rival, commit, None
            self.finished_runs.add(key)
        return ("overlap", policy, rival, self.locks[lock].lease_expires)

    def take_lock(self, attempt: Attempt, lock: str, policy: Policy) -> tuple:
        """A claim taken without the job lock takes it: ('claim', Attempt) with a new fence,
        ('overlap', ...) as a locked claim would be, or ('held', in_progress, None, None)."""
        run = self.runs.get(attempt.key)
        if not self._holds(attempt):
            return ("held", IN_PROGRESS, None, None)
        assert run is not None
        rival = self._rival(lock, attempt.key)
        if rival is None:
            commit = self._commit()
            assert run.attempt is not None and run.lease_expires is not None
            run.commit, run.locked_by = commit, attempt.seq
            self._lock(lock, Lock(attempt.key, run.attempt, run.lease_expires, commit))
            return ("claim", replace(attempt, commit=commit, lock=lock))
        if policy is Policy.SKIP:
            return self._overlap(attempt.key, run, lock, policy, rival)
        run.lease_expires, run.commit, run.locked_by = self.now, self._commit(), None
        return ("overlap", policy, rival, self.locks[lock].lease_expires)

    # Finishing writes, fenced.

    def _holds(self, attempt: Attempt) -> bool:
        run = self.runs.get(attempt.key)
        return run is not None and run.commit == attempt.commit

    def _ours(self, attempt: Attempt, status: str) -> bool:
        """A stale claim's write is refused; its answer says whether the record is already this
        attempt's with `status` (its own write, whose answer was lost)."""
        run = self.runs.get(attempt.key)
        return run is not None and run.attempt == attempt.seq and run.status == status

    def _free_lock(self, attempt: Attempt) -> None:
        held = self.locks.get(attempt.lock) if attempt.lock is not None else None
        if held is not None and held.commit == attempt.commit:
            assert attempt.lock is not None
            del self.locks[attempt.lock]

    def finish(self, attempt: Attempt, status: str) -> bool:
        """complete (COMPLETED) or fail (FAILED)."""
        if not self._holds(attempt):
            return self._ours(attempt, status)
        run = self.runs[attempt.key]
        run.status, run.commit, run.locked_by = status, self._commit(), None
        self._free_lock(attempt)
        self.finished_runs.add(attempt.key)
        return True

    def release(self, attempt: Attempt) -> bool:
        """The claim given up so a retry runs at once: the record deleted (a reopened run's lease
        ended instead, so its history stays), the lock freed."""
        if attempt.reopened:
            if not self._holds(attempt):
                return self._ours(attempt, IN_PROGRESS)
            run = self.runs[attempt.key]
            run.lease_expires, run.commit, run.locked_by = self.now, self._commit(), None
            self._free_lock(attempt)
            return True
        if not self._holds(attempt):
            return attempt.key not in self.runs
        self._free_lock(attempt)
        del self.runs[attempt.key]
        return True

    def hold(self, attempt: Attempt, seconds: float) -> bool:
        """The claim kept in progress `seconds` from now (outcome unknown); its lock as long."""
        if not self._holds(attempt):
            return self._ours(attempt, IN_PROGRESS)
        run = self.runs[attempt.key]
        held = self.locks.get(attempt.lock) if attempt.lock is not None else None
        commit = self._commit()
        run.lease_expires, run.commit = self.now + timedelta(seconds=seconds), commit
        if held is not None and held.commit == attempt.commit:
            held.lease_expires, held.commit = run.lease_expires, commit
        return True

    # The operators' verbs.

    def release_held(self, key: str, seq: int, force: bool) -> str | None:
        """`runonce release`: end the lease of attempt `seq`; None when done, else the refusal."""
        run = self.runs.get(key)
        if run is None:
            return "no_record"
        if run.status != IN_PROGRESS:
            return "not_in_progress"
        if run.attempt != seq:
            return "taken_over"
        if not force and self._live(run.lease_expires):
            return "lease_live"
        run.lease_expires, run.commit = self.now, self._commit()
        return None

    def request_rerun(self, slot: str, key: str, insist: bool, ttl: timedelta) -> str:
        """`runonce rerun`: 'pending' (the request written), 'refused' or 'request_pending'."""
        run = self.runs.get(key)
        if run is None or (run.status == IN_PROGRESS and self._live(run.lease_expires)):
            return "refused"
        if run.status == COMPLETED and not insist:
            return "refused"
        if self._pending(slot):
            return "request_pending"
        self.requests += 1
        self.slots[slot] = Request(self.requests, key, "pending", self.now + ttl)
        return "pending"

    def _pending(self, slot: str) -> bool:
        request = self.slots.get(slot)
        return request is not None and request.state == "pending" and request.expires > self.now

    def take_rerun(self, slot: str, forced: str) -> tuple | None:
        """A forced delivery `forced`: None, or ('rerun', key, Attempt | None): the re-run it
        carries, with the reopened run's claim when this delivery consumed the request."""
        carried = self.delivered.get(forced)
        told = ("rerun", carried, None) if carried is not None else None
        if carried is not None or not self._pending(slot):
            return told
        request = self.slots[slot]
        run = self.runs.get(request.key)
        if run is None or not (
            run.status in FINISHED or (run.status == IN_PROGRESS and not self._live(run.lease_expires))
        ):
            request.state = "void"
            self._commit()
            return None
        commit, seq = self._commit(), self._attempt()
        run.status, run.attempt, run.attempts, run.commit = IN_PROGRESS, seq, run.attempts + 1, commit
        run.lease_expires, run.reopened, run.skipped_for, run.locked_by = (
            self.now + self.lease,
            run.reopened + 1,
            None,
            None,
        )
        self.finished_runs.discard(request.key)
        self.delivered[forced] = request.key
        request.state = "consumed"
        return ("rerun", request.key, Attempt(seq, request.key, run.attempts, commit, True))

    # The invariants.

    def violations(self, locks: dict[str, str]) -> list[str]:
        """What breaks the protocol's promises in this state (empty: none). `locks`: each job
        lock's id -> its job's run key prefix."""
        found = []
        for lock, prefix in locks.items():
            live = [
                key
                for key, run in self.runs.items()
                if key.startswith(prefix)
                and run.status == IN_PROGRESS
                and run.locked_by is not None
                and run.locked_by == run.attempt
                and self._live(run.lease_expires)
            ]
            if len(live) > 1:
                found.append(f"runs {live} all hold job lock {lock}")
        for key in self.finished_runs:
            run = self.runs.get(key)
            if run is None or run.status not in FINISHED:
                found.append(f"finished run {key} is {run.status if run else 'gone'} without a re-run")
        for lock, held in self.locks.items():
            run = self.runs.get(held.holder)
            if (
                run is not None
                and run.commit == held.commit
                and (run.attempt != held.attempt or run.lease_expires != held.lease_expires)
            ):
                found.append(f"lock {lock} and its holder {held.holder} disagree")
        return found
