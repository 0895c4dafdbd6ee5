"""The verdict on an event job: did every published message end with exactly one completed run,
or in the dead-letter subscription with its reason? None lost, none run twice.

A message is judged the same way for any job, from the emulators' and the store's state, never
from what the harness expected or what the job does: its ledger record (found by runonce's own
event key), the job bodies read from the lines the runonce core logs around every body (see
`bodies`), the effects the job's folder declares in its `local_demo.toml` (see `effects`; none
declared: the message is judged on the rest), and the copies read back from the dead-letter
subscription (matched to the message by the `demo_id` attribute every copy keeps). The pushes
the proxy answered say when an instance died under a body that never ended, and fill the
table's delivery columns.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime

from google.cloud import firestore

from localscheduler.pubsub.push_proxy import Push
from localscheduler.pubsub.topology import DeadLetter
from localscheduler.store import Ledger
from localscheduler.verdicts.bodies import Body, succession_problems
from localscheduler.verdicts.effects import Effects
from localscheduler.verdicts.table import aligned
from runonce.contract import EXPIRE_AT_FIELD, BodyEnd
from runonce.core.event import Event
from runonce.events.adapter import TOO_OLD_ERROR
from runonce.events.parse import event_key

DEMO_ID_ATTRIBUTE = "demo_id"
COMPLETED = "completed"
# Body endings after which the message must not run again (unless its instance died before
# runonce recorded the end).
NORMAL_ENDS = (BodyEnd.SUCCEEDED, BodyEnd.PERMANENT)


@dataclass(frozen=True)
class Limits:
    """The two limits a message can be dead-lettered for reaching, as its function and its
    subscription were set."""

    max_event_age_seconds: float
    """RUNONCE_MAX_EVENT_AGE_SECONDS of the function."""
    max_delivery_attempts: int
    """The dead-letter policy of the message's subscription."""


@dataclass(frozen=True)
class Published:
    """One message the harness published, and the fault it carries."""

    demo_id: str
    message_id: str
    topic: str
    subscription: str
    fault: str
    expected: str
    """The fate the fault should lead to: completed, permanent_failure, too_old or delivery_attempts.
    A dead letter with another reason passes if the reason is true for the message (timing can
    decide which limit a message reaches first); a completed end where a dead letter was planned
    does not (the fault makes the job fail, or holds the message past its age)."""
    limits: Limits

    @property
    def key(self) -> str:
        """The run key runonce derives for this message's pushes."""
        return event_key(Event(id=self.message_id, source=self.subscription, time=None))


@dataclass(frozen=True)
class EventStore:
    """One read of an event job's ledger, its declared effects and its job bodies."""

    records: dict[str, dict]
    """Ledger records by run key."""
    effects: dict[str, list[str | None]] | None
    """The attempts that wrote each run key's effects (None where the job does not record it);
    None if the job's folder declares no effects."""
    bodies: Mapping[str, Sequence[Body]]
    """Job bodies by run key, in start order."""

    @classmethod
    def read(
        cls,
        client: firestore.Client,
        runs: Ledger,
        effects: Effects | None,
        bodies: Mapping[str, Sequence[Body]],
    ) -> EventStore:
        """Read the ledger `runs` and the declared effects in `client`'s Firestore whole (a demo's
        or a chaos run's worth)."""
        return cls(runs.records(), None if effects is None else effects.read(client), bodies)


@dataclass(frozen=True)
class MessageVerdict:
    """How one message ended, and what is wrong with it (nothing, for a good message)."""

    message: Published
    fate: str
    """completed, permanent_failure, too_old, delivery_attempts, lost, or several joined by +."""
    effects: int | None
    """Effects found for it; None where the job's folder declares none to look at."""
    bodies: int
    found: int
    """Bodies that succeeded after the body that wrote the effect (killed before runonce recorded
    it) had started: they found the effect written."""
    problems: tuple[str, ...]
    evidence: str = ""
    """Why a dead letter's reason is true for the message (empty for a completed message)."""

    @property
    def ok(self) -> bool:
        """The message ended exactly once, as its fault says it should."""
        return not self.problems


def instance_deaths(pushes: Sequence[Push]) -> dict[str, list[tuple[str, datetime, datetime]]]:
    """By messageId: the pushes of it whose instance died under them: (instance, arrived, died).
    A push answered `deadline_exceeded` counts too: its instance kept the request and may have
    died under it after the answer."""
    deaths: dict[str, list[tuple[str, datetime, datetime]]] = {}
    for push in pushes:
        if push.died is not None:
            span = (
                push.instance,
                datetime.fromtimestamp(push.started, UTC),
                datetime.fromtimestamp(push.died, UTC),
            )
            deaths.setdefault(push.message_id, []).append(span)
    return deaths


def _death(body: Body, deaths: Sequence[tuple[str, datetime, datetime]]) -> datetime | None:
    """When the instance running `body` died under the push that carried it (None: it did not).
    A push that fails at once on a dying instance carried no body and excuses none."""
    return min(
        (
            died
            for instance, arrived, died in deaths
            if instance == body.instance and arrived <= body.started <= died
        ),
        default=None,
    )


def _ending(body: Body) -> str:
    return "killed" if body.end is None else body.end.value


def _ending_problems(record: dict, bodies: Sequence[Body]) -> list[str]:
    """Whether the ledger's end is the one the last body says: completed after a success, failed
    after a permanent failure (both written by that body's attempt), and neither otherwise."""
    status = record.get("status")
    last = bodies[-1] if bodies else None
    too_old = str(record.get("error") or "").startswith(TOO_OLD_ERROR)
    if status == COMPLETED or (status == "failed" and not too_old):
        wanted = BodyEnd.SUCCEEDED if status == COMPLETED else BodyEnd.PERMANENT
        if last is None:
            return [f"{status} without a job body"]
        problems = []
        if last.end is not wanted:
            problems.append(f"{status}, but its last body ended {_ending(last)}")
        if record.get("attempt_id") != last.attempt_id:
            problems.append(f"finished by attempt {record.get('attempt_id')}, not by its last body's")
        return problems
    if last is not None and last.end in NORMAL_ENDS:
        return [f"its last body ended {_ending(last)}, but the ledger says {status}"]
    return []


def _letter_problems(message: Published, record: dict, letters: Sequence[DeadLetter]) -> list[str]:
    """A copy by Pub/Sub only for a message runonce never finished; runonce's own copies name the
    event and are the one recorded on its failed record."""
    status = record.get("status")
    problems = []
    for letter in letters:
        if letter.by_pubsub:
            if status in (COMPLETED, "failed"):
                problems.append(f"dead-lettered by Pub/Sub although the ledger says {status}")
            continue
        if letter.attributes.get("runonce_event_id") != message.message_id:
            problems.append("dead-letter copy names another event")
        if status != "failed" or record.get("dead_letter_message_id") != letter.message_id:
            problems.append("dead-letter copy not recorded on a failed ledger record")
    return problems


# The answers on which the emulator acknowledges a push (see FACTS): any other is a nack.
ACKNOWLEDGING = frozenset({102, 200, 201, 203, 204})
PERMANENT_FAILURE = "permanent_failure"
TOO_OLD = "too_old"
DELIVERY_ATTEMPTS = "delivery_attempts"


def _as_wall(value: object) -> float | None:
    return value.timestamp() if isinstance(value, datetime) else None


def _reason_problems(
    message: Published, record: dict, reason: str, pushes: Sequence[Push]
) -> tuple[list[str], str]:
    """Whether a dead letter's reason is true for the message, from the ledger and the pushes the
    proxy saw (independent of the function's word): (problems, the evidence that it is true)."""
    status, error = record.get("status"), str(record.get("error") or "")
    if reason == DELIVERY_ATTEMPTS:
        deliveries = [push for push in pushes if not push.copy]
        nacked = [push for push in deliveries if push.status not in ACKNOWLEDGING]
        limit = message.limits.max_delivery_attempts
        if len(nacked) < limit or len(nacked) < len(deliveries):
            return [
                f"dead-lettered by Pub/Sub for its delivery attempts after {len(deliveries)} deliveries, "
                f"{len(nacked)} of them nacked, of {limit} allowed: the reason is false"
            ], ""
        return [], f"{len(nacked)} deliveries, each nacked, of {limit} allowed"
    if reason == PERMANENT_FAILURE:
        if status != "failed" or error.startswith(TOO_OLD_ERROR):
            return [f"copy says permanent_failure, but the ledger says {status}: {error[:80]}"], ""
        return [], "its last body failed permanently, by the ledger and its log"
    if reason != TOO_OLD:
        return [f"dead-letter copy with reason {reason!r}, which no limit or failure gives"], ""
    if status != "failed" or not error.startswith(TOO_OLD_ERROR):
        return [f"copy says too_old, but the ledger says {status}: {error[:80]}"], ""
    handled = _as_wall(record.get("finished_at"))
    published = next((push.published for push in pushes if push.published is not None), None)
    if handled is None or published is None:
        return ["too_old, but its publishTime or the moment it was recorded failed is unknown"], ""
    if not any(push.started <= handled <= push.ended for push in pushes):
        return ["recorded too old at a moment when no push of it was open"], ""
    age, max_age = handled - published, message.limits.max_event_age_seconds
    if age <= max_age:
        return [
            f"dead-lettered too_old at {age:.1f} s old, within the maximum age of {max_age:g} s: "
            "the reason is false"
        ], ""
    return [], f"{age:.1f} s old when handled, past the {max_age:g} s maximum age"


def judge_message(
    message: Published,
    store: EventStore,
    letters: Sequence[DeadLetter],
    deaths: Sequence[tuple[str, datetime, datetime]] = (),
    pushes: Sequence[Push] = (),
) -> MessageVerdict:
    """The verdict on one message from one read of the store, its dead letters, the instance
    deaths under its pushes and its pushes (which the truth of a dead letter's reason needs)."""
    record = store.records.get(message.key) or {}
    status = record.get("status")
    bodies = store.bodies.get(message.key, [])
    ends = [letter.reason for letter in letters] + ([COMPLETED] if status == COMPLETED else [])
    fate = "+".join(ends) or "lost"
    problems = succession_problems(bodies, lambda body: _death(body, deaths))
    if len(ends) != 1:
        problems.append(
            f"{len(ends) - len(letters)} completed records and {len(letters)} dead-letter copies: "
            "not exactly one end"
        )
    writers = None if store.effects is None else store.effects.get(message.key, [])
    if writers is not None:
        if len(writers) != (1 if status == COMPLETED else 0):
            problems.append(f"{len(writers)} effects, ledger status {status}")
        started = {body.attempt_id for body in bodies}
        problems += [
            f"effect written by attempt {writer}, which started no body of this message"
            for writer in writers
            if writer is not None and writer not in started
        ]
    problems += _ending_problems(record, bodies)
    problems += _letter_problems(message, record, letters)
    if record and EXPIRE_AT_FIELD not in record:
        problems.append(f"ledger record without {EXPIRE_AT_FIELD}")
    evidence = ""
    if len(letters) == 1:
        wrong, evidence = _reason_problems(message, record, letters[0].reason, pushes)
        problems += wrong
    if fate == COMPLETED and message.expected != COMPLETED:
        problems.append(f"expected {message.expected} for fault {message.fault}, got {fate}")
    first = next((i for i, body in enumerate(bodies) if writers and body.attempt_id in writers), len(bodies))
    found = sum(body.end is BodyEnd.SUCCEEDED for body in bodies[first + 1 :])
    effects = None if writers is None else len(writers)
    return MessageVerdict(message, fate, effects, len(bodies), found, tuple(problems), evidence)


def judge_all(
    messages: Sequence[Published], store: EventStore, letters: Sequence[DeadLetter], pushes: Sequence[Push]
) -> tuple[list[MessageVerdict], list[DeadLetter]]:
    """A verdict per message, and the dead letters that belong to none of them."""
    by_id: dict[str, list[DeadLetter]] = {}
    for letter in letters:
        if not letter.note:  # the note names its copy, which is judged
            by_id.setdefault(letter.original.attributes.get(DEMO_ID_ATTRIBUTE, ""), []).append(letter)
    deaths = instance_deaths(pushes)
    by_message: dict[str, list[Push]] = {}
    for push in pushes:
        by_message.setdefault(push.message_id, []).append(push)
    verdicts = [
        judge_message(
            m, store, by_id.pop(m.demo_id, []), deaths.get(m.message_id, []), by_message.get(m.message_id, [])
        )
        for m in messages
    ]
    strays = [letter for group in by_id.values() for letter in group]
    return verdicts, strays


@dataclass
class EventRow:
    """One event job's line in the table."""

    job: str
    published: int = 0
    deliveries: int = 0
    bodies: int = 0
    effects: int | None = 0
    """Effects found; None where the job's folder declares none (shown n/a)."""
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
    observed = all(v.effects is not None for v in verdicts)
    return EventRow(
        job=job,
        published=len(verdicts),
        deliveries=len(pushes),
        bodies=sum(v.bodies for v in verdicts),
        effects=sum(v.effects or 0 for v in verdicts) if observed else None,
        permanent=fates["permanent_failure"],
        expired=fates["too_old"],
        dead_lettered=fates["permanent_failure"] + fates["too_old"] + fates["delivery_attempts"],
        duplicates=sum(p.outcome == "duplicate" for p in pushes),
        in_progress=sum(p.outcome == "in_progress" for p in pushes),
        bad=[v for v in verdicts if not v.ok],
    )


def render_events(rows: Sequence[EventRow]) -> str:
    """The rows as an aligned text table, one per event job."""
    lines = [[title for _, title in COLUMNS]]
    lines += [[_cell(getattr(row, name)) for name, _ in COLUMNS] for row in rows]
    return aligned(lines)


def _cell(value: object) -> str:
    return "n/a" if value is None else str(value)


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
    completed = sum(v.fate == COMPLETED for v in verdicts)
    letters = Counter(v.fate for v in verdicts if v.fate != COMPLETED)
    bodies = sum(v.bodies for v in verdicts)
    again = sum(v.bodies > 1 for v in verdicts)
    reasons = ", ".join(f"{reason} {count}" for reason, count in sorted(letters.items()))
    observed = all(v.effects is not None for v in verdicts)
    kind, unit = ("one effect", "effects") if observed else ("one completed ledger record", "completed")
    lines = [
        f"every message had exactly {kind} or one dead-letter copy with a reason true for it ({completed} "
        f"{unit} + {sum(letters.values())} dead letters [{reasons}] = {len(verdicts)} published)",
        f"{bodies} job bodies for {len(verdicts)} messages, never two of one message at a time; "
        f"{again} messages started their body again, each after a kill or a retryable error",
    ]
    unplanned = [v for v in verdicts if v.fate != v.message.expected]
    if unplanned:
        lines.append(
            f"{len(unplanned)} messages reached another limit than planned first, a true reason accepted:"
        )
        lines += [
            f"  message {v.message.message_id} ({v.message.fault}, planned {v.message.expected}): "
            f"{v.fate}, {v.evidence}"
            for v in unplanned
        ]
    if not observed:
        lines.append(
            "effects not observed (no [effects] in the folder's local_demo.toml, see "
            "localscheduler.verdicts.effects): judged on the ledger, the job bodies and the dead letters"
        )
    return lines
