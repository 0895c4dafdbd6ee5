"""The verdict on an event job: did every published message end with exactly one effect, or in
the dead-letter subscription with its reason? None lost, none run twice.

A message is judged from the emulator's and the store's state, never from what the harness
expected: its ledger record (found by runonce's own event key), the outbox documents and body
traces the job wrote, and the copies read back from the dead-letter subscription (matched to the
message by the `demo_id` attribute every copy keeps). The pushes the proxy saw only fill the
table's delivery columns.
"""

from __future__ import annotations

import itertools
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field

from google.cloud import firestore

from runonce.event import Event, event_key

from .pubsub_topology import DeadLetter
from .push_proxy import Push
from .table import aligned

DEMO_ID_ATTRIBUTE = "demo_id"
# How a body ended, as the example job writes it; a body with no end was killed.
NORMAL_ENDS = ("effect_written", "effect_found", "permanent_failure")


@dataclass(frozen=True)
class Published:
    """One message the harness published, and the fault it carries."""

    demo_id: str
    message_id: str
    topic: str
    subscription: str
    fault: str
    expected: str
    """The fate the fault should lead to: completed, permanent_failure, too_old or delivery_attempts."""

    @property
    def key(self) -> str:
        """The run key runonce derives for this message's pushes."""
        return event_key(Event(id=self.message_id, source=self.subscription, time=None))


@dataclass(frozen=True)
class EventStore:
    """One read of the ledger, the outbox and the body traces of an event job."""

    records: dict[str, dict]
    effects: dict[str, list[str]]
    """The attempt ids that wrote each run key's outbox documents (one, for a good message)."""
    bodies: dict[str, list[dict]]
    """Body traces by run key, in start order."""

    @classmethod
    def read(cls, client: firestore.Client, runs: str, outbox: str, bodies: str) -> EventStore:
        """Read the three collections whole (a demo's or a chaos run's worth of documents)."""
        records = {doc.id: doc.to_dict() or {} for doc in client.collection(runs).stream()}
        effects: dict[str, list[str]] = {}
        for doc in client.collection(outbox).stream():
            effect = doc.to_dict() or {}
            effects.setdefault(str(effect.get("run_key")), []).append(str(effect.get("attempt_id")))
        traces: dict[str, list[dict]] = {}
        for doc in client.collection(bodies).stream():
            trace = {**(doc.to_dict() or {}), "attempt_id": doc.id}
            traces.setdefault(str(trace.get("run_key")), []).append(trace)
        for group in traces.values():
            group.sort(key=lambda trace: trace["started_at"])
        return cls(records, effects, traces)


@dataclass(frozen=True)
class MessageVerdict:
    """How one message ended, and what is wrong with it (nothing, for a good message)."""

    message: Published
    fate: str
    """completed, permanent_failure, too_old, delivery_attempts, lost, or several joined by +."""
    effects: int
    bodies: int
    found: int
    """Bodies that reached the effect and found it written by an earlier body (after a kill)."""
    problems: tuple[str, ...]

    @property
    def ok(self) -> bool:
        """The message ended exactly once, as its fault says it should."""
        return not self.problems


def _body_problems(traces: Sequence[dict]) -> list[str]:
    problems = []
    for earlier, later in itertools.pairwise(traces):
        ended = earlier.get("ended")
        if ended in NORMAL_ENDS:
            problems.append(f"a body started again after one that ended normally ({ended})")
        elif ended is not None and later["started_at"] < earlier["ended_at"]:
            problems.append("two bodies ran at the same time")
    return problems


def judge_message(message: Published, store: EventStore, letters: Sequence[DeadLetter]) -> MessageVerdict:
    """The verdict on one message from one read of the store and every dead letter read."""
    record = store.records.get(message.key) or {}
    status = record.get("status")
    writers = store.effects.get(message.key, [])
    effects = len(writers)
    traces = store.bodies.get(message.key, [])
    # A body killed right after its effect never wrote its end: the outbox names the writer.
    claimed = {trace["attempt_id"] for trace in traces if trace.get("ended") == "effect_written"}
    fates = [letter.reason for letter in letters] + ["completed"] * effects
    fate = "+".join(fates) or "lost"
    problems = _body_problems(traces)
    if len(fates) != 1:
        problems.append(f"{effects} effects and {len(letters)} dead-letter copies: not exactly one end")
    if effects and not (claimed <= set(writers) and set(writers) <= {t["attempt_id"] for t in traces}):
        problems.append("the bodies that say they wrote the effect are not the ones the outbox names")
    if effects and status != "completed":
        problems.append(f"effect written but ledger status {status}")
    for letter in letters:
        if letter.by_pubsub:
            if status in ("completed", "failed"):
                problems.append(f"dead-lettered by Pub/Sub although the ledger says {status}")
            continue
        if letter.attributes.get("runonce_event_id") != message.message_id:
            problems.append("dead-letter copy names another event")
        if status != "failed" or record.get("dead_letter_message_id") != letter.message_id:
            problems.append("dead-letter copy not recorded on a failed ledger record")
    if record and "expire_at" not in record:
        problems.append("ledger record without expire_at")
    if fate != message.expected and not problems:
        problems.append(f"expected {message.expected} for fault {message.fault}, got {fate}")
    found = sum(trace.get("ended") == "effect_found" for trace in traces)
    return MessageVerdict(message, fate, effects, len(traces), found, tuple(problems))


def judge_all(
    messages: Sequence[Published], store: EventStore, letters: Sequence[DeadLetter]
) -> tuple[list[MessageVerdict], list[DeadLetter]]:
    """A verdict per message, and the dead letters that belong to none of them."""
    by_id: dict[str, list[DeadLetter]] = {}
    for letter in letters:
        by_id.setdefault(letter.attributes.get(DEMO_ID_ATTRIBUTE, ""), []).append(letter)
    verdicts = [judge_message(m, store, by_id.pop(m.demo_id, [])) for m in messages]
    strays = [letter for group in by_id.values() for letter in group]
    return verdicts, strays


@dataclass
class EventRow:
    """One event job's line in the table."""

    job: str
    published: int = 0
    deliveries: int = 0
    bodies: int = 0
    effects: int = 0
    permanent: int = 0
    expired: int = 0
    dead_lettered: int = 0
    duplicates: int = 0
    in_progress: int = 0
    bad: list[MessageVerdict] = field(default_factory=list)

    @property
    def verdict(self) -> str:
        """ok, or how many messages broke the guarantee."""
        return "ok" if not self.bad else f"FAIL {len(self.bad)}"


COLUMNS = [
    ("job", "event job"),
    ("published", "published"),
    ("deliveries", "deliveries"),
    ("bodies", "bodies started"),
    ("effects", "effects"),
    ("permanent", "perm. failed"),
    ("expired", "expired"),
    ("dead_lettered", "dead-lettered"),
    ("duplicates", "dup. skipped"),
    ("in_progress", "409s"),
    ("verdict", "verdict"),
]


def event_row(job: str, verdicts: Sequence[MessageVerdict], pushes: Sequence[Push]) -> EventRow:
    """The table line of one job from its verdicts and the pushes its proxy answered."""
    fates = Counter(part for v in verdicts for part in v.fate.split("+"))
    return EventRow(
        job=job,
        published=len(verdicts),
        deliveries=len(pushes),
        bodies=sum(v.bodies for v in verdicts),
        effects=sum(v.effects for v in verdicts),
        permanent=fates["permanent_failure"],
        expired=fates["too_old"],
        dead_lettered=fates["permanent_failure"] + fates["too_old"] + fates["delivery_attempts"],
        duplicates=sum(p.outcome == "duplicate" for p in pushes),
        in_progress=sum(p.outcome == "in_progress" for p in pushes),
        bad=[v for v in verdicts if not v.ok],
    )


def render_events(rows: Sequence[EventRow]) -> str:
    """The rows as an aligned text table."""
    lines = [[title for _, title in COLUMNS]]
    lines += [[str(getattr(row, name)) for name, _ in COLUMNS] for row in rows]
    return aligned(lines)


def event_summary(verdicts: Sequence[MessageVerdict], strays: Sequence[DeadLetter]) -> list[str]:
    """The verdict in words."""
    bad = [v for v in verdicts if not v.ok]
    lines = [
        f"  FAIL message {v.message.message_id} ({v.message.fault}): {'; '.join(v.problems)}" for v in bad
    ]
    if strays:
        lines.append(f"  FAIL {len(strays)} dead letters belong to no published message")
    if bad or strays:
        return [*lines, f"{len(bad)} of {len(verdicts)} messages broke the guarantee"]
    effects = sum(v.effects for v in verdicts)
    letters = Counter(v.fate for v in verdicts if v.fate != "completed")
    bodies = sum(v.bodies for v in verdicts)
    again = sum(v.bodies > 1 for v in verdicts)
    reasons = ", ".join(f"{reason} {count}" for reason, count in sorted(letters.items()))
    return [
        f"every message had exactly one effect or one dead-letter copy with its reason "
        f"({effects} effects + {sum(letters.values())} dead letters [{reasons}] = {len(verdicts)} published)",
        f"{bodies} job bodies for {len(verdicts)} messages, never two of one message at a time; "
        f"{again} messages started their body again, each after a kill or a retryable error",
    ]
