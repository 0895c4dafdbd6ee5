"""An event job on the real Pub/Sub emulator, delivered with faults, judged: the demo's second
part and the event chaos test both run one `EventHarness` per event job.

Publisher -> topics -> push subscriptions (ack deadline, retry policy, dead-letter policy) -> the
push proxy (lost acks, late arrivals, duplicate pushes, instances killed holding the claim) -> a
pool of functions-framework instances serving any folder's `@deduplicated_event` entry point (the
example's, or a team file's `EventJob`), or a service's event route (`hosts.service`: the Flask
app on gunicorn, the FastAPI app on uvicorn) -> the ledger and the job's effects in the Firestore
emulator (the ledger on a Valkey server instead, with `store`), the body lines the runonce core
logs, and dead letters in the dead-letter topic's pull subscription. Each harness has a project of
its own on both emulators, and on a Valkey server a key prefix of its own, so a job's own default
collections (those its folder's `[effects]` table names) and its ledger start empty.

Unlike the scheduled part, events run on the real clock: the emulator's backoffs, ack deadline
and publishTime are wall time, so the lease, the ack deadline and the maximum event age are
seconds here too (see `EventConfig`). "Too old" is a message the network holds back (the proxy
lets no delivery of it through before publishTime + the maximum age + 3 s); the function then
measures its age from publishTime, as deployed.
"""

from __future__ import annotations

import os
import random
import re
import time
import uuid
from collections import Counter
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from google.cloud import firestore

from localscheduler.clock import AcceleratedClock
from localscheduler.demos.event_data import DEFAULT_DATA, EventData, declared_event_data
from localscheduler.hosts.apps.job import ATTEMPT_ID_FIELD, RUN_KEY_FIELD
from localscheduler.hosts.pool import InstancePool
from localscheduler.hosts.service import Service
from localscheduler.pubsub.push_proxy import (
    DEADLINE_EXCEEDED,
    DUPLICATE_ATTRIBUTE,
    HOLD_ATTRIBUTE,
    KILL_ATTRIBUTE,
    LOSE_ACK_ATTRIBUTE,
    OpenPush,
    Push,
    PushJournal,
    PushProxy,
)
from localscheduler.pubsub.topology import DeadLetter, PushPolicy, Topology
from localscheduler.store import RUNS_COLLECTION, Ledger, ledger, store_env
from localscheduler.verdicts.bodies import read_bodies
from localscheduler.verdicts.effects import Effects, FirestoreEffects, declared_effects
from localscheduler.verdicts.events import (
    COMPLETED,
    DEMO_ID_ATTRIBUTE,
    EventRow,
    EventStore,
    Limits,
    MessageVerdict,
    Published,
    event_row,
    judge_all,
)
from stacks.team import FUNCTIONS_DIR, EventJob

# Events run on the real clock: this clock reads wall time as it is (for `bodies.read_bodies`).
WALL_CLOCK = AcceleratedClock(datetime.fromtimestamp(0, UTC), 0.0, 1.0)


@dataclass(frozen=True)
class EventFunction:
    """The function an event harness serves: a folder's main.py and entry point."""

    source_dir: Path
    """The folder: main.py, and optionally local_demo.toml with `[effects]` and `[events]`."""
    entry_point: str = "handle"
    """The `@deduplicated_event` function under `@functions_framework.http` in main.py."""
    env: dict[str, str] = field(default_factory=dict)
    """The job's own environment (RUNONCE_* are the harness's)."""

    @classmethod
    def of(cls, job: EventJob) -> EventFunction:
        """The function of a team file's event job."""
        return cls(job.source_dir, job.entry_point, dict(job.env))


EXAMPLE = EventFunction(FUNCTIONS_DIR / "events_example")


# What the margins below are derived from, measured through this harness on the 2-core machine
# at load 3.7-7.6 (docs/demo.md, "Under load"). The emulator pushes a nacked message again about
# every 3 s at a 1 s backoff (2.9-3.1 s between pushes; the first retry 1.0 s after the nack) and
# never sooner than the minimum backoff; a push took up to 2.0 s to answer, and the slow job's
# push 2.4 s more than its work.
REDELIVERY_SECONDS = 3.0
"""The emulator's pace for a nacked message at a 1 s backoff."""
LOADED_PUSH_SECONDS = 2.5
"""The most a push (or a body's own overhead) took to be answered on a loaded machine."""
SAFETY = 1.5
"""How much slower than the measured load the plan still holds."""
QUIET_SECONDS = 4.0
"""How long no push may be open before the harness judges: a lost ack's or a slow job's
redelivery still comes after the message ended."""


@dataclass(frozen=True)
class EventConfig:
    """The timing of a local event job, in wall seconds, and the margins it keeps on a slow machine.

    A slow job works past the ack deadline (the emulator pushes it again while it runs) but
    within its lease, so the redelivery meets a live lease (409) and never a second body: the
    lease outlasts the work plus a loaded push's overhead, SAFETY times over. A crashed body's
    lease expires within `lease_seconds`, and however fast the machine, Pub/Sub pushes no more
    than one delivery per minimum backoff meanwhile, so `policy` leaves a killed message
    delivery attempts to be taken over with (a takeover runs even past the maximum age). A
    message that always fails is nacked on a subscription of its own with `exhausted_policy`,
    whose few attempts run out well within the maximum age even at SAFETY times the measured
    load, so Pub/Sub dead-letters it before it is too old. The proxy ends every push within the
    ack deadline and every request to an instance within `request_timeout_seconds`, which the slow
    job's work fits in; the harness waits `settle_seconds` for the last planned end plus a
    request timeout and an ack deadline, SAFETY times over, then the quiet. `margin_problems`
    checks them all.
    """

    lease_seconds: int = 16
    max_event_age_seconds: int = 40
    slow_work_seconds: float = 11.0
    policy: PushPolicy = field(default_factory=lambda: PushPolicy(max_delivery_attempts=20))
    exhausted_policy: PushPolicy = field(default_factory=lambda: PushPolicy(max_delivery_attempts=5))
    """The subscription of each `attempts_exhausted` message: 5 is Pub/Sub's minimum."""
    topics: int = 3
    """Shared topics (one push subscription each) for the messages acknowledged at their first
    push; late messages get one more, and each message that is nacked one of its own (see
    `ISOLATED`)."""
    instances: int = 3
    request_timeout_seconds: float = 30.0
    """How long the proxy lets an instance work on one request (Cloud Run's request timeout)."""
    settle_seconds: float = 150.0
    """How long the harness waits for every message to end and the pushes to stop."""

    def exhausted_seconds(self) -> float:
        """The longest an always-failing message takes to use its attempts on a loaded machine."""
        attempts = self.exhausted_policy.max_delivery_attempts
        return attempts * LOADED_PUSH_SECONDS + (attempts - 1) * REDELIVERY_SECONDS

    def margin_problems(self, faults: Collection[str]) -> list[str]:
        """Where this timing leaves the planned end of one of `faults` to the machine's speed."""
        problems = []
        if "slow" in faults and self.slow_work_seconds + SAFETY * LOADED_PUSH_SECONDS > self.lease_seconds:
            problems.append(
                f"a slow job ({self.slow_work_seconds:g} s) must end within the lease "
                f"({self.lease_seconds} s) with {SAFETY * LOADED_PUSH_SECONDS:g} s to spare"
            )
        # At most one push per minimum backoff while the lease runs, then the one that takes over.
        during_lease = self.lease_seconds // self.policy.minimum_backoff_seconds + 2
        if during_lease > self.policy.max_delivery_attempts:
            problems.append(
                f"{self.policy.max_delivery_attempts} delivery attempts can run out within a "
                f"{self.lease_seconds} s lease: allow at least {during_lease}"
            )
        longest = SAFETY * self.exhausted_seconds()
        if "attempts_exhausted" in faults and longest > self.max_event_age_seconds:
            problems.append(
                f"{self.exhausted_policy.max_delivery_attempts} delivery attempts can take {longest:g} s "
                f"on a loaded machine, past the maximum event age ({self.max_event_age_seconds} s)"
            )
        slowest = self.slow_work_seconds + SAFETY * LOADED_PUSH_SECONDS
        if "slow" in faults and slowest > self.request_timeout_seconds:
            problems.append(
                f"a slow job ({self.slow_work_seconds:g} s) must end within the request timeout "
                f"({self.request_timeout_seconds:g} s) with {SAFETY * LOADED_PUSH_SECONDS:g} s to spare"
            )
        if self.policy.ack_deadline_seconds != self.exhausted_policy.ack_deadline_seconds:
            problems.append(
                f"the proxy applies one ack deadline: policy has {self.policy.ack_deadline_seconds} s, "
                f"exhausted_policy {self.exhausted_policy.ack_deadline_seconds} s"
            )
        wanted = SAFETY * self.last_end_seconds(faults) + QUIET_SECONDS
        if wanted > self.settle_seconds:
            problems.append(
                f"settle_seconds ({self.settle_seconds:g} s) must outlast the last planned end, a request "
                f"timeout and an ack deadline on a loaded machine, then {QUIET_SECONDS:g} s of quiet: "
                f"allow at least {wanted:g}"
            )
        return problems

    def last_end_seconds(self, faults: Collection[str]) -> float:
        """After publishing, how long until the last push of `faults` ends on a loaded machine (no
        SAFETY): the latest planned end (a late message's release, a killed message's takeover,
        an always-failing message's last attempt), then a redelivery that meets an instance still
        working on a request, past the ack deadline, up to the request timeout."""
        ends = [self.lease_seconds + REDELIVERY_SECONDS, self.slow_work_seconds]
        if "too_old" in faults:
            ends.append(self.max_event_age_seconds + LATE_SECONDS)
        if "attempts_exhausted" in faults:
            ends.append(self.exhausted_seconds())
        return max(ends) + self.policy.ack_deadline_seconds + self.request_timeout_seconds


LATE_SECONDS = 3
"""How long past the maximum age the proxy holds a late message."""


# fault -> (the message attributes that cause it, the fate it must lead to)
def fault_table(config: EventConfig) -> dict[str, tuple[dict[str, str], str]]:
    """Every fault the harness can inject, its attributes, and the fate it must end in."""
    return {
        "none": ({}, COMPLETED),
        "slow": ({"work_seconds": str(config.slow_work_seconds)}, COMPLETED),
        "lost_ack": ({LOSE_ACK_ATTRIBUTE: "1"}, COMPLETED),
        "duplicate_push": ({DUPLICATE_ATTRIBUTE: "1"}, COMPLETED),
        "killed_holding_claim": ({KILL_ATTRIBUTE: "1"}, COMPLETED),
        "retryable": ({"fault": "retryable"}, COMPLETED),
        "kill_before_effect": ({"fault": "kill_before_effect"}, COMPLETED),
        "kill_after_effect": ({"fault": "kill_after_effect"}, COMPLETED),
        "permanent": ({"fault": "permanent"}, "permanent_failure"),
        "too_old": ({HOLD_ATTRIBUTE: str(config.max_event_age_seconds + LATE_SECONDS)}, "too_old"),
        "attempts_exhausted": ({"fault": "always_retryable"}, "delivery_attempts"),
    }


# The faults that need nothing from the job (the proxy makes them): any event job can take them.
# The others are knobs only functions/events_example reads from the message attributes.
GENERIC_FAULTS = ("none", "lost_ack", "duplicate_push", "killed_holding_claim", "too_old")

# Every message that is nacked at least once (each fault here) gets a subscription of its own:
# the emulator stops redelivering when several nacked messages of one push subscription are
# outstanding (3 of them: after 3 rounds; in a run of 500 messages even single retries stalled),
# and does not resume within minutes, not even when new messages arrive. Real Pub/Sub has no
# such limit. Messages acknowledged at their first push share the `topics` shared topics.
ISOLATED = (
    "slow",
    "lost_ack",
    "duplicate_push",
    "killed_holding_claim",
    "retryable",
    "kill_before_effect",
    "kill_after_effect",
    "attempts_exhausted",
)

DEMO_MIX = {
    "none": 30,
    "slow": 2,
    "lost_ack": 5,
    "retryable": 5,
    "kill_before_effect": 2,
    "kill_after_effect": 2,
    "permanent": 4,
    "too_old": 4,
    "attempts_exhausted": 2,
}
# A team file's event job: the generic faults only, fewer messages.
TEAM_MIX = {"none": 12, "lost_ack": 2, "duplicate_push": 2, "killed_holding_claim": 2, "too_old": 2}
# No slow job and no always-failing one among the generic faults, so the lease only has to outlast
# a fast body and the run is shorter: a killed message is taken over after 6 s, a late one is
# held 21 s.
TEAM_CONFIG = EventConfig(lease_seconds=6, max_event_age_seconds=18)


@dataclass(frozen=True)
class EventResult:
    """What one event job produced: a verdict per message, the pushes, the table row."""

    verdicts: list[MessageVerdict]
    strays: list[DeadLetter]
    pushes: list[Push]
    row: EventRow
    restarts: int
    unsettled: tuple[str, ...]
    """What was still waited for when the harness gave up (see `unsettled`); empty if settled."""
    seconds: float

    @property
    def settled(self) -> bool:
        """Every message ended (effect or dead letter) and the pushes stopped before the timeout."""
        return not self.unsettled

    @property
    def ok(self) -> bool:
        """Every message ended exactly once as its fault says, nothing stray, nothing pending."""
        return self.settled and not self.strays and all(v.ok for v in self.verdicts)

    def faults(self) -> str:
        """One line: how many messages carried each fault, and the instances replaced."""
        counts = Counter(v.message.fault for v in self.verdicts if v.message.fault != "none")
        parts = ", ".join(f"{name} {count}" for name, count in sorted(counts.items()))
        return f"faults injected: {parts or 'none'}; instances replaced: {self.restarts}"


def unsettled(
    messages: Sequence[Published],
    ends: Mapping[str, str],
    open_pushes: Sequence[OpenPush],
    quiet_for: float,
    quiet: float,
    now: float,
) -> tuple[str, ...]:
    """Each condition the harness still waited for when it gave up, one line each: a message that
    never ended; a push still open (its message, attempt and age at `now`, monotonic, and whether
    its message had ended: a redelivery of an ended message is not a lost one); pushes that ended
    less than `quiet` seconds ago."""
    lines = [
        f"message {m.message_id} ({m.fault}) never ended: no completed ledger record, no dead letter"
        for m in messages
        if m.message_id not in ends
    ]
    for push in open_pushes:
        end = ends.get(push.message_id)
        whose = f"a redelivery of a message that had ended ({end})" if end else "its message had not ended"
        lines.append(f"push still open, {whose}: {push.describe(now)}")
    if not lines and quiet_for < quiet:
        lines.append(f"pushes still coming: the last ended {quiet_for:.1f} s ago, {quiet:g} s of quiet asked")
    return tuple(lines)


class EventHarness:
    """One event job on the emulators: start(), publish(), settle(), judge(), stop()."""

    def __init__(
        self,
        name: str,
        function: EventFunction | Service,
        mix: dict[str, int],
        seed: int,
        project: str,
        log_dir: Path,
        config: EventConfig | None = None,
        store: str | None = None,
    ):
        """`store`: the instances' RUNONCE_STORE, a Valkey server's URL (None: the Firestore emulator)."""
        self.name = name
        self.function = function
        self.mix = mix
        self.seed = seed
        self.config = config or EventConfig()
        unknown = sorted(set(mix) - set(fault_table(self.config)))
        if unknown:
            known = ", ".join(fault_table(self.config))
            raise ValueError(f"{name}: unknown event fault {unknown[0]!r}; the faults are {known}")
        problems = self.config.margin_problems([fault for fault, count in mix.items() if count])
        if problems:
            raise ValueError(f"{name}: {'; '.join(problems)}")
        # A project of its own on both emulators: the job's collections start empty.
        self.project = f"{project}-{uuid.uuid4().hex[:8]}"
        self.store = store
        self.collection = RUNS_COLLECTION if store is None else f"{RUNS_COLLECTION}-{self.project}"
        self.slug = re.sub(r"[^a-z0-9-]+", "-", name.lower())
        self.effects: Effects | None
        if isinstance(function, Service):
            service = function.events()
            self.effects = FirestoreEffects(service.outbox, RUN_KEY_FIELD, ATTEMPT_ID_FIELD)
            self.data = EventData(DEFAULT_DATA)
            self.pool = service.pool(self.slug, self.config.instances, {}, log_dir)
        else:
            # Read now: a mistake in the folder's local_demo.toml stops the demo before anything starts.
            self.effects = declared_effects(function.source_dir)
            self.data = declared_event_data(function.source_dir)
            self.pool = InstancePool(
                self.slug,
                function.source_dir / "main.py",
                function.entry_point,
                self.config.instances,
                dict(function.env),
                log_dir,
            )
        self.journal = PushJournal()
        self.topology: Topology | None = None
        self.proxy: PushProxy | None = None
        self.messages: list[Published] = []
        self.letters: list[DeadLetter] = []
        self._client: firestore.Client | None = None
        self._ledger: Ledger | None = None
        self._began = 0.0

    def start(self, pubsub_host: str) -> EventHarness:
        """Start the instances, the proxy, and create the topics and subscriptions; this process's
        PUBSUB_EMULATOR_HOST must already point at `pubsub_host` (the clients read it)."""
        if os.environ.get("PUBSUB_EMULATOR_HOST") != pubsub_host:
            raise RuntimeError(f"set PUBSUB_EMULATOR_HOST={pubsub_host} first: the Pub/Sub clients read it")
        topology = Topology(self.project, self.slug)
        self.pool.env.update(
            PUBSUB_EMULATOR_HOST=pubsub_host,
            GOOGLE_CLOUD_PROJECT=self.project,
            RUNONCE_LEASE_SECONDS=str(self.config.lease_seconds),
            RUNONCE_MAX_EVENT_AGE_SECONDS=str(self.config.max_event_age_seconds),
            RUNONCE_DEAD_LETTER_TOPIC=topology.dead_letter_topic,
            RUNONCE_COLLECTION=self.collection,
            **store_env(self.store),
        )
        self.pool.start()
        self.proxy = PushProxy(
            self.pool,
            self.journal,
            self.config.policy.ack_deadline_seconds,
            self.config.request_timeout_seconds,
        ).start()
        self.topology = topology.create_dead_letters()
        self._client = firestore.Client(project=self.project)
        self._ledger = ledger(self._client, self.store, self.collection)
        return self

    def publish(self) -> list[Published]:
        """Publish the mix in a seeded order: ordinary messages round-robin over the shared topics,
        late ones on a topic of their own (held deliveries would otherwise block two push slots
        of a shared one), and each message of an ISOLATED fault on a topic of its own."""
        topology, proxy = self.topology, self.proxy
        assert topology is not None and proxy is not None, "start() first"
        table = fault_table(self.config)
        faults = [name for name, count in self.mix.items() for _ in range(count)]
        random.Random(self.seed).shuffle(faults)
        shared = [topology.add(proxy.url, self.config.policy) for _ in range(self.config.topics)]
        late = topology.add(proxy.url, self.config.policy)
        config = self.config
        routes = [
            late
            if fault == "too_old"
            else topology.add(proxy.url, config.exhausted_policy)
            if fault == "attempts_exhausted"
            else topology.add(proxy.url, config.policy)
            if fault in ISOLATED
            else shared[number % len(shared)]
            for number, fault in enumerate(faults)
        ]
        self._began = time.monotonic()
        for number, (fault, (topic, subscription)) in enumerate(zip(faults, routes, strict=True)):
            attributes, expected = table[fault]
            demo_id = f"{number:05d}"
            data = self.data.message(number)
            message_id = topology.publish(topic, data, {**attributes, DEMO_ID_ATTRIBUTE: demo_id})
            policy = config.exhausted_policy if fault == "attempts_exhausted" else config.policy
            limits = Limits(config.max_event_age_seconds, policy.max_delivery_attempts)
            self.messages.append(Published(demo_id, message_id, topic, subscription, fault, expected, limits))
        return self.messages

    def ended(self) -> dict[str, str]:
        """The messages that have ended so far, by messageId: `completed` in the ledger, or
        `dead-lettered (reason)` for one read back as a dead letter."""
        assert self.topology is not None and self._ledger is not None
        self.letters += self.topology.pull_dead_letters()
        records = self._ledger.records()
        reasons = {
            letter.original.attributes.get(DEMO_ID_ATTRIBUTE, ""): letter.reason
            for letter in self.letters
            if not letter.note
        }
        ends = {}
        for message in self.messages:
            if (records.get(message.key) or {}).get("status") == COMPLETED:
                ends[message.message_id] = COMPLETED
            elif message.demo_id in reasons:
                ends[message.message_id] = f"dead-lettered ({reasons[message.demo_id]})"
        return ends

    def settle(
        self, timeout: float, quiet: float = QUIET_SECONDS, progress: Callable[[str], None] | None = None
    ) -> tuple[str, ...]:
        """Wait until every message ended and no push was open for `quiet` seconds (a lost ack's or
        a slow job's redelivery still comes after the end); if `timeout` passes first, what was
        still waited for (see `unsettled`), else nothing."""
        deadline = time.monotonic() + timeout
        shown = time.monotonic()
        while True:
            ends = self.ended()
            if progress is not None and time.monotonic() - shown >= 5.0:
                shown = time.monotonic()
                progress(self.status(len(ends)))
            quiet_for = self.journal.quiet_for()
            if len(ends) >= len(self.messages) and quiet_for >= quiet:
                return ()
            if time.monotonic() >= deadline:
                return unsettled(self.messages, ends, self.journal.open(), quiet_for, quiet, time.monotonic())
            time.sleep(1.0)

    def status(self, ended: int) -> str:
        """One progress line."""
        pushes = self.journal.snapshot()
        return (
            f"[{time.monotonic() - self._began:5.1f}s] {self.name}: ended {ended}/{len(self.messages)} | "
            f"pushes {len(pushes)} (open {len(self.journal.open())}, past the ack deadline "
            f"{sum(p.outcome == DEADLINE_EXCEEDED for p in pushes)}) | "
            f"409s {sum(p.outcome == 'in_progress' for p in pushes)} | "
            f"duplicates {sum(p.outcome == 'duplicate' for p in pushes)} | "
            f"instances replaced {self.pool.restarts}"
        )

    def judge(self, unsettled: tuple[str, ...] = ()) -> EventResult:
        """The verdict from the ledger, the declared effects, the body lines and the dead letters."""
        assert self.topology is not None and self._client is not None and self._ledger is not None
        self.letters += self.topology.pull_dead_letters()
        bodies = read_bodies(self.pool.log_dir, WALL_CLOCK)
        store = EventStore.read(self._client, self._ledger, self.effects, bodies)
        pushes = self.journal.snapshot()
        verdicts, strays = judge_all(self.messages, store, self.letters, pushes)
        return EventResult(
            verdicts,
            strays,
            pushes,
            event_row(self.name, verdicts, pushes),
            self.pool.restarts,
            unsettled,
            time.monotonic() - self._began,
        )

    def play(
        self, timeout: float | None = None, progress: Callable[[str], None] | None = None
    ) -> EventResult:
        """publish(), settle() (for `timeout`, by default the config's `settle_seconds`) and
        judge(), once started. Harnesses may play side by side, but start one at a time: an
        instance's port is chosen before its process binds it."""
        self.publish()
        waited = self.config.settle_seconds if timeout is None else timeout
        return self.judge(self.settle(waited, progress=progress))

    def run(
        self, pubsub_host: str, timeout: float | None = None, progress: Callable[[str], None] | None = None
    ) -> EventResult:
        """start() and play(); the caller stops it."""
        return self.start(pubsub_host).play(timeout, progress)

    def pids(self) -> list[int]:
        """Process groups of the instances still running."""
        return self.pool.pids()

    def stop(self) -> None:
        """Stop the proxy and the instances; safe to call twice."""
        if self.proxy is not None:
            self.proxy.stop()
            self.proxy = None
        self.pool.stop()
        if self.topology is not None:
            self.topology.close()
            self.topology = None
