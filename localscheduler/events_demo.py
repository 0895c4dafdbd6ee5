"""An event job on the real Pub/Sub emulator, delivered with faults, judged: the demo's second
part and the event chaos test both run one `EventHarness`.

Publisher -> topics -> push subscriptions (ack deadline, retry policy, dead-letter policy) -> the
push proxy (lost acks, late arrivals) -> a pool of functions-framework instances serving
`functions/events_example` under `@deduplicated_event` -> its ledger, outbox and body traces in
the Firestore emulator, and dead letters in the dead-letter topic's pull subscription.

Unlike the scheduled part, events run on the real clock: the emulator's backoffs, ack deadline
and publishTime are wall time, so the lease, the ack deadline and the maximum event age are
seconds here too (see `EventConfig`). "Too old" is a message the network holds back (the proxy
lets no delivery of it through before publishTime + the maximum age + 3 s); the function then
measures its age from publishTime, as deployed.
"""

from __future__ import annotations

import os
import random
import time
import uuid
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from google.cloud import firestore

from stacks.team import REPO_ROOT

from .event_verdict import (
    DEMO_ID_ATTRIBUTE,
    EventRow,
    EventStore,
    MessageVerdict,
    Published,
    event_row,
    judge_all,
)
from .instances import InstancePool
from .pubsub_topology import DeadLetter, PushPolicy, Topology
from .push_proxy import HOLD_ATTRIBUTE, LOSE_ACK_ATTRIBUTE, Push, PushJournal, PushProxy

EVENT_FUNCTION = REPO_ROOT / "functions" / "events_example" / "main.py"
COMPLETED = "completed"


@dataclass(frozen=True)
class EventConfig:
    """The timing of a local event job, in wall seconds.

    A slow job works past the ack deadline (the emulator pushes it again while it runs) but
    within its lease, so the redelivery meets a live lease (409) and never a second body. A
    crashed body's lease expires within `lease_seconds`; the delivery attempts (one a second at
    the 1 s backoff) outlast it, and the maximum event age outlasts the lease plus the wait for a
    free instance, so a killed message is taken over, not dead-lettered. The emulator pushes a
    nacked message again about every 2 s, so a message that always fails exhausts its 12
    attempts in about 25 s, before it is too old.
    """

    lease_seconds: int = 13
    max_event_age_seconds: int = 40
    slow_work_seconds: float = 11.0
    policy: PushPolicy = field(default_factory=lambda: PushPolicy(max_delivery_attempts=12))
    topics: int = 3
    """Shared topics (one push subscription each) for the messages acknowledged at their first
    push; late messages get one more, and each message that is nacked one of its own (see
    `ISOLATED`)."""
    instances: int = 3


# fault -> (the message attributes that cause it, the fate it must lead to)
def fault_table(config: EventConfig) -> dict[str, tuple[dict[str, str], str]]:
    """Every fault the harness can inject, its attributes, and the fate it must end in."""
    return {
        "none": ({}, COMPLETED),
        "slow": ({"work_seconds": str(config.slow_work_seconds)}, COMPLETED),
        "lost_ack": ({LOSE_ACK_ATTRIBUTE: "1"}, COMPLETED),
        "retryable": ({"fault": "retryable"}, COMPLETED),
        "kill_before_effect": ({"fault": "kill_before_effect"}, COMPLETED),
        "kill_after_effect": ({"fault": "kill_after_effect"}, COMPLETED),
        "permanent": ({"fault": "permanent"}, "permanent_failure"),
        "too_old": ({HOLD_ATTRIBUTE: str(config.max_event_age_seconds + 3)}, "too_old"),
        "attempts_exhausted": ({"fault": "always_retryable"}, "delivery_attempts"),
    }


# Every message that is nacked at least once (each fault here) gets a subscription of its own:
# the emulator stops redelivering when several nacked messages of one push subscription are
# outstanding (3 of them: after 3 rounds; in a run of 500 messages even single retries stalled),
# and does not resume within minutes, not even when new messages arrive. Real Pub/Sub has no
# such limit. Messages acknowledged at their first push share the `topics` shared topics.
ISOLATED = ("slow", "lost_ack", "retryable", "kill_before_effect", "kill_after_effect", "attempts_exhausted")

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


@dataclass(frozen=True)
class EventResult:
    """What one event job produced: a verdict per message, the pushes, the table row."""

    verdicts: list[MessageVerdict]
    strays: list[DeadLetter]
    pushes: list[Push]
    row: EventRow
    restarts: int
    settled: bool
    """Every message ended (effect or dead letter) and the pushes stopped before the timeout."""
    seconds: float

    @property
    def ok(self) -> bool:
        """Every message ended exactly once as its fault says, nothing stray, nothing pending."""
        return self.settled and not self.strays and all(v.ok for v in self.verdicts)

    def faults(self) -> str:
        """One line: how many messages carried each fault, and the instances replaced."""
        counts = Counter(v.message.fault for v in self.verdicts if v.message.fault != "none")
        parts = ", ".join(f"{name} {count}" for name, count in sorted(counts.items()))
        return f"faults injected: {parts or 'none'}; instances replaced: {self.restarts}"


class EventHarness:
    """One event job on the emulators: start(), publish(), settle(), judge(), stop()."""

    def __init__(
        self,
        job: str,
        mix: dict[str, int],
        seed: int,
        project: str,
        log_dir: Path,
        config: EventConfig | None = None,
    ):
        self.job = job
        self.mix = mix
        self.seed = seed
        self.project = project
        self.config = config or EventConfig()
        prefix = f"ev{uuid.uuid4().hex[:8]}"
        self.collections = {name: f"{prefix}_{name}" for name in ("runs", "outbox", "bodies", "marks")}
        self.journal = PushJournal()
        self.topology: Topology | None = None
        self.proxy: PushProxy | None = None
        self.messages: list[Published] = []
        self.letters: list[DeadLetter] = []
        self.pool = InstancePool(
            job,
            EVENT_FUNCTION,
            "handle",
            self.config.instances,
            {},
            log_dir,
        )
        self._client: firestore.Client | None = None
        self._began = 0.0

    def start(self, pubsub_host: str) -> EventHarness:
        """Start the instances, the proxy, and create the topics and subscriptions; this process's
        PUBSUB_EMULATOR_HOST must already point at `pubsub_host` (the clients read it)."""
        if os.environ.get("PUBSUB_EMULATOR_HOST") != pubsub_host:
            raise RuntimeError(f"set PUBSUB_EMULATOR_HOST={pubsub_host} first: the Pub/Sub clients read it")
        topology = Topology(self.project, self.job)
        self.pool.env.update(
            PUBSUB_EMULATOR_HOST=pubsub_host,
            GOOGLE_CLOUD_PROJECT=self.project,
            RUNONCE_LEASE_SECONDS=str(self.config.lease_seconds),
            RUNONCE_MAX_EVENT_AGE_SECONDS=str(self.config.max_event_age_seconds),
            RUNONCE_DEAD_LETTER_TOPIC=topology.dead_letter_topic,
            RUNONCE_COLLECTION=self.collections["runs"],
            EVENT_OUTBOX_COLLECTION=self.collections["outbox"],
            EVENT_BODIES_COLLECTION=self.collections["bodies"],
            EVENT_FAULT_MARKS_COLLECTION=self.collections["marks"],
        )
        self.pool.start()
        self.proxy = PushProxy(self.pool, self.journal).start()
        self.topology = topology.create_dead_letters()
        self._client = firestore.Client(project=self.project)
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
        routes = [
            late
            if fault == "too_old"
            else topology.add(proxy.url, self.config.policy)
            if fault in ISOLATED
            else shared[number % len(shared)]
            for number, fault in enumerate(faults)
        ]
        self._began = time.monotonic()
        for number, (fault, (topic, subscription)) in enumerate(zip(faults, routes, strict=True)):
            attributes, expected = table[fault]
            demo_id = f"{number:05d}"
            data = f'{{"order": {number}}}'.encode()
            message_id = topology.publish(topic, data, {**attributes, DEMO_ID_ATTRIBUTE: demo_id})
            self.messages.append(Published(demo_id, message_id, topic, subscription, fault, expected))
        return self.messages

    def ended(self) -> int:
        """Messages that have ended so far: completed in the ledger, or read as a dead letter."""
        assert self.topology is not None and self._client is not None
        self.letters += self.topology.pull_dead_letters()
        runs = self._client.collection(self.collections["runs"])
        completed = sum(
            1 for _ in runs.where(filter=firestore.FieldFilter("status", "==", COMPLETED)).stream()
        )
        return completed + len(self.letters)

    def settle(
        self, timeout: float, quiet: float = 4.0, progress: Callable[[str], None] | None = None
    ) -> bool:
        """Wait until every message ended and no push came for `quiet` seconds (a lost ack's or a
        slow job's redelivery still comes after the end); False if `timeout` passed first."""
        deadline = time.monotonic() + timeout
        shown = time.monotonic()
        while time.monotonic() < deadline:
            ended = self.ended()
            if progress is not None and time.monotonic() - shown >= 5.0:
                shown = time.monotonic()
                progress(self.status(ended))
            if ended >= len(self.messages) and self.journal.quiet_for() >= quiet:
                return True
            time.sleep(1.0)
        return False

    def status(self, ended: int) -> str:
        """One progress line."""
        pushes = self.journal.snapshot()
        return (
            f"[{time.monotonic() - self._began:5.1f}s] {self.job}: ended {ended}/{len(self.messages)} | "
            f"pushes {len(pushes)} | 409s {sum(p.outcome == 'in_progress' for p in pushes)} | "
            f"duplicates {sum(p.outcome == 'duplicate' for p in pushes)} | "
            f"instances replaced {self.pool.restarts}"
        )

    def judge(self, settled: bool) -> EventResult:
        """The verdict from the ledger, the outbox, the body traces and the dead letters."""
        assert self.topology is not None and self._client is not None
        self.letters += self.topology.pull_dead_letters()
        store = EventStore.read(
            self._client, self.collections["runs"], self.collections["outbox"], self.collections["bodies"]
        )
        verdicts, strays = judge_all(self.messages, store, self.letters)
        pushes = self.journal.snapshot()
        return EventResult(
            verdicts,
            strays,
            pushes,
            event_row(self.job, verdicts, pushes),
            self.pool.restarts,
            settled,
            time.monotonic() - self._began,
        )

    def run(
        self, pubsub_host: str, timeout: float, progress: Callable[[str], None] | None = None
    ) -> EventResult:
        """start(), publish(), settle() and judge(); the caller stops it."""
        self.start(pubsub_host)
        self.publish()
        return self.judge(self.settle(timeout, progress=progress))

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
