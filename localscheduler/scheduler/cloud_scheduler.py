"""The local Cloud Scheduler: plan -> triggers -> attempts -> retries, on the accelerated clock.

Each scheduled run (and each forced run the fault mix adds) is a `Trigger`. At its time the
scheduler sends the first attempt to an instance of the job's function, with that run's fault,
then retries by the job's retry_config until an attempt is answered 2xx, the retries are used
up, or the job's next scheduled time comes. A trigger marked as a planned miss (see `misses`) is
either not delivered at all or delivered so that every attempt holding its claim dies.
"""

from __future__ import annotations

import itertools
import json
import subprocess
import threading
import time
from dataclasses import dataclass
from datetime import datetime

from localscheduler.clock import AcceleratedClock
from localscheduler.hosts.pool import DYING_SECONDS, KILL_HEADER, Instance, InstancePool
from localscheduler.scheduler.delivery import Answer, post, scheduler_headers
from localscheduler.scheduler.faults import AttemptShape, Fault, FaultMix, shape
from localscheduler.scheduler.journal import GaveUp, Journal, NotDelivered, Sent
from localscheduler.scheduler.plan import PlannedRun
from localscheduler.scheduler.retry import RetryPolicy
from localscheduler.store import Ledger, claimed, key_of
from runonce.contract import MissedRun

# How often the instance-killing fault looks for the attempt's claim in the ledger.
CLAIM_POLL_SECONDS = 0.005


@dataclass(frozen=True)
class Trigger:
    """One run to deliver: a scheduled run, or a forced run carrying the next scheduled time."""

    run: PlannedRun
    """The run whose ScheduleTime the deliveries carry."""
    forced: bool
    at: datetime
    """When the first attempt is sent."""
    stop: datetime
    """Retries stop here: the job's next scheduled time."""
    miss: MissedRun | None = None
    """A planned miss (see `misses`): NEVER_DELIVERED is not sent; RETRIED_OUT is sent without
    its fault, and every attempt that starts the job body dies holding the claim."""

    @property
    def key(self) -> str:
        """The handler's run key for this trigger's deliveries."""
        return key_of(self.run, self.forced)


def triggers(runs: list[PlannedRun], faults: FaultMix, forced_skew: float) -> list[Trigger]:
    """The scheduled runs of one job (in order) plus the forced runs the mix adds, by send time."""
    result = [Trigger(run, False, run.schedule_time, run.next_time) for run in runs]
    for run, following in itertools.pairwise(runs):
        at = faults.forced_run_at(run, forced_skew)
        if at is not None:
            result.append(Trigger(following, True, at, run.next_time))
    return sorted(result, key=lambda trigger: trigger.at)


def job_body(body: str, shape: AttemptShape, clock: AcceleratedClock) -> bytes:
    """The job's configured body, plus the example job's knobs when the fault needs them."""
    knobs: dict[str, float | str | bool] = {}
    if shape.work:
        knobs["work_seconds"] = round(clock.wall_seconds(shape.work), 4)
    if shape.fail:
        knobs["fail"] = shape.fail
    if shape.kill_after_effect:
        knobs["kill_after_effect"] = True
    if not knobs:
        return body.encode()
    payload = json.loads(body or "{}")
    if not isinstance(payload, dict):
        raise ValueError(f"faults need a JSON object body to add knobs to, got {body!r}")
    return json.dumps({**payload, **knobs}).encode()


class LocalScheduler:
    """Sends triggers to instance pools like Cloud Scheduler, and journals every delivery."""

    def __init__(
        self,
        clock: AcceleratedClock,
        pools: dict[tuple[str, str], InstancePool],
        leases: dict[tuple[str, str], int],
        faults: FaultMix,
        ledger: Ledger,
        journal: Journal,
    ):
        """`pools` and `leases` are keyed by (team name, job name); `ledger` is where the
        instances keep their runs."""
        self.clock = clock
        self.pools = pools
        self.leases = leases
        self.faults = faults
        self.ledger = ledger
        self.journal = journal
        self.stopping = threading.Event()
        self._threads: list[threading.Thread] = []

    def run(self, plan: list[Trigger]) -> None:
        """Deliver every trigger at its time; return once each is acknowledged or given up."""
        for trigger in sorted(plan, key=lambda t: t.at):
            if not self.clock.sleep_until(trigger.at, self.stopping):
                break
            thread = threading.Thread(target=self._deliver, args=(trigger,), daemon=True)
            thread.start()
            self._threads.append(thread)
        for thread in self._threads:
            thread.join()

    def stop(self) -> None:
        """Send nothing more; runs in flight stop after their current attempt."""
        self.stopping.set()

    def _deliver(self, trigger: Trigger) -> None:
        job, team = trigger.run.job, trigger.run.team
        policy = RetryPolicy(job.retry)
        lease = self.leases[(team.name, job.name)]
        first = self.clock.now()
        if trigger.miss is MissedRun.NEVER_DELIVERED:
            skipped = NotDelivered(team.name, job.name, trigger.run.schedule_time, trigger.forced, first)
            self.journal.add(skipped)
            return
        fault = Fault.NONE if trigger.miss else self.faults.fault_for(trigger.run, trigger.forced)
        attempt = 1
        while True:
            current = shape(fault if attempt == 1 else Fault.NONE, job.attempt_deadline_seconds, lease)
            if self._attempt(trigger, attempt, current, fault if attempt == 1 else Fault.NONE):
                return
            at = policy.next_retry(attempt - 1, first, self.clock.now(), trigger.stop)
            if at is None:
                self.journal.add(
                    GaveUp(
                        team.name,
                        job.name,
                        trigger.run.schedule_time,
                        trigger.forced,
                        attempt,
                        self.clock.now(),
                    )
                )
                return
            if not self.clock.sleep_until(at, self.stopping):
                return
            attempt += 1

    def _attempt(self, trigger: Trigger, attempt: int, shape: AttemptShape, fault: Fault) -> bool:
        """Send one attempt (and its duplicate copy); True if Scheduler saw a 2xx."""
        body = job_body(trigger.run.job.body, shape, self.clock)
        copy = None
        if shape.twice:
            copy = threading.Thread(
                target=self._send, args=(trigger, attempt, shape, fault, body, True), daemon=True
            )
            copy.start()
        acknowledged = self._send(trigger, attempt, shape, fault, body, False)
        if copy is not None:
            copy.join()
        return acknowledged

    def _send(
        self, trigger: Trigger, attempt: int, shape: AttemptShape, fault: Fault, body: bytes, is_copy: bool
    ) -> bool:
        run = trigger.run
        pool = self.pools[(run.team.name, run.job.name)]
        headers = scheduler_headers(run.team, run.job, run.schedule_time)
        dies_holding_claim = trigger.miss is MissedRun.RETRIED_OUT
        if dies_holding_claim:
            headers[KILL_HEADER] = trigger.key
        deadline = self.clock.wall_seconds(shape.deadline)
        sent_at = self.clock.now()
        started = time.monotonic()
        killed = threading.Event()
        with pool.acquire(deadline) as instance:
            if instance is None:
                answer = Answer(None, error="no_instance")
            else:
                done = threading.Event()
                watcher = threading.Thread(
                    target=self._kill_when_claimed,
                    args=(trigger, attempt, pool, instance, shape, done, killed),
                    daemon=True,
                )
                if shape.kill and not is_copy:
                    watcher.start()
                # The instance is to die under this attempt: keep its process (replaced once it dies).
                dying = dies_holding_claim or (shape.kill_after_effect and not is_copy)
                process = instance.process if dying else None
                answer = post(instance.url, headers, body, deadline - (time.monotonic() - started))
                done.set()
                if watcher.is_alive():
                    watcher.join()
                if shape.kill_after_effect and not is_copy and answer.error == "connection":
                    killed.set()  # the job killed its own instance after its effect
                if dying and answer.status is None and not killed.is_set() and self._dies(process, trigger):
                    killed.set()
        answered_at = self.clock.now()
        acknowledged = answer.ok and not shape.lose_response
        self.journal.add(
            Sent(
                team=run.team.name,
                job=run.job.name,
                schedule_time=run.schedule_time,
                forced=trigger.forced,
                attempt=attempt,
                copy=is_copy,
                fault=fault.value,
                sent_at=sent_at,
                instance=instance.name if instance else "",
                status=answer.status,
                outcome=answer.outcome,
                acknowledged=acknowledged,
                killed=killed.is_set(),
                answered_at=answered_at,
            )
        )
        return acknowledged

    def _dies(self, process: subprocess.Popen | None, trigger: Trigger) -> bool:
        """The instance serving an attempt that was to die (a stuck claim's, or a job that kills its
        instance after its effect) died under it. On a loaded machine the attempt deadline, a
        fraction of a wall second at the demo's rate, can pass first, and the death then comes
        after it: wait up to the run's lease for the process to end (a retry meanwhile would meet
        the dying attempt's live lease anyway)."""
        lease = self.leases[(trigger.run.team.name, trigger.run.job.name)]
        if process is None:
            return False
        try:
            process.wait(timeout=max(DYING_SECONDS, self.clock.wall_seconds(lease)))
        except subprocess.TimeoutExpired:
            return False
        return True

    def _kill_when_claimed(
        self,
        trigger: Trigger,
        attempt: int,
        pool: InstancePool,
        instance: Instance,
        shape: AttemptShape,
        done: threading.Event,
        killed: threading.Event,
    ) -> None:
        """Kill the instance once the ledger shows this attempt holding the run, before the job ends."""
        give_up = time.monotonic() + self.clock.wall_seconds(shape.work) / 2
        while not done.is_set() and time.monotonic() < give_up:
            if claimed(self.ledger, trigger.key, attempt):
                killed.set()
                pool.kill(instance)
                return
            time.sleep(CLAIM_POLL_SECONDS)
