"""`runonce replay COPY_ID`: publish the original of a dead-letter copy back to its job's topic,
once, fenced on the original's record, then acknowledge the copy.

Three steps, each recorded before the next begins:

1. In one transaction on the record (the event's run record for runonce's copies; for Pub/Sub's
   own copies, whose original run key no attribute gives, a record of that copy's replays), refuse
   if the record's last replay step is `replay`, `replay_unknown` or `replay_published` (unless
   `--again`), else append a `replay` entry.
2. Publish the original (data, attributes, ordering key). A publish Pub/Sub refused appends
   `replay_failed`: the copy is put back and a later replay is not refused. A publish that ended
   without an answer (a deadline, an unavailable service) may have landed: it appends
   `replay_unknown`, the copy is put back, and a later replay is refused as for a crash.
3. Append `replay_published` with the new messageId, then acknowledge the copy (and a bare
   copy's note).

A crash between 1 and 3 leaves a `replay` entry without its outcome: the original may or may not
have been published. The copy stays in the subscription (it was never acknowledged; its lease ends
within `HOLD_SECONDS`), and the next replay is refused, saying the earlier one is unconfirmed, so
the operator looks at the job's runs first and passes `--again` only if it did not run. A crash
between 3 and the acknowledgement leaves the copy in the subscription with its replay confirmed:
replaying that same copy again acknowledges it and publishes nothing.
"""

from __future__ import annotations

import hashlib
import importlib
import json
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from google.api_core import exceptions as gexc

from operate import dead_letters
from operate.actions import appended, entry, log_change
from operate.dead_letters import DeadLetter
from operate.team import EventJob
from runonce import _clock as clock
from runonce.contract import ACTIONS_FIELD, EXPIRE_AT_FIELD
from runonce.core.occurrence import KEY_VERSION
from runonce.core.store import Refusal, Store
from runonce.events.deadletter import Original

REPLAY = "replay"
PUBLISHED = "replay_published"
FAILED = "replay_failed"
UNKNOWN = "replay_unknown"
REPLAY_STEPS = (REPLAY, PUBLISHED, FAILED, UNKNOWN)
# Answers by which Pub/Sub refused the publish: nothing was published. Any other error (a
# deadline, an unavailable service, a lost connection) leaves it unknown whether it was.
REFUSED_PUBLISH = (
    gexc.NotFound,
    gexc.PermissionDenied,
    gexc.Unauthenticated,
    gexc.InvalidArgument,
    gexc.FailedPrecondition,
)
COPY_RECORD_RETENTION = timedelta(days=8)
"""How long the record of a Pub/Sub copy's replays is kept: past the dead-letter subscription's
7 days, so the copy cannot outlive it."""
PUBLISH_SECONDS = 30.0


@dataclass(frozen=True)
class Replay:
    """What a replay did: `outcome` (replayed, acknowledged, refused, failed) and why."""

    outcome: str
    key: str
    message: str
    message_id: str = ""

    @property
    def changed(self) -> bool:
        """Whether the copy left the subscription (replayed, or its earlier replay finished)."""
        return self.outcome in ("replayed", "acknowledged")


def record_key(letter: DeadLetter) -> str:
    """The record a replay is fenced on: the event's run record, or one for this Pub/Sub copy."""
    if letter.run_key:
        return letter.run_key
    parts = [KEY_VERSION, "dead-letter-copy", letter.subscription, letter.copy_id]
    return hashlib.sha256(json.dumps(parts).encode()).hexdigest()


def last_step(record: dict[str, Any] | None) -> dict[str, Any] | None:
    """The record's last replay step (`replay`, `replay_published` or `replay_failed`), or None."""
    steps = [
        action for action in (record or {}).get(ACTIONS_FIELD) or [] if action.get("action") in REPLAY_STEPS
    ]
    return steps[-1] if steps else None


def replay(
    store: Store, publisher: Any, subscriber: Any, job: EventJob, letter: DeadLetter, by: str, again: bool
) -> Replay:
    """Replay `letter` (taken from the subscription, leased) to `job`'s topic; see the module."""
    key = record_key(letter)
    if letter.original is None:
        dead_letters.put_back(subscriber, letter.subscription, [letter.ack_id, *letter.note_ack_ids])
        return Replay(
            "refused", key, f"copy {letter.copy_id} cannot be replayed: {letter.unreadable}; it stays"
        )
    original = letter.original
    detail = {"copy": letter.copy_id, "topic": job.topic, "subscription": letter.subscription, "run_key": key}
    begun = entry(REPLAY, by, {**detail, "again": again})

    def decide(record: dict[str, Any] | None) -> dict[str, Any] | Refusal:
        last = last_step(record)
        if last is not None and last["action"] != FAILED and not again:  # replayed, or maybe replayed
            return Refusal.REPLAYED
        fields: dict[str, Any] = {ACTIONS_FIELD: appended(record, begun)}
        if record is None:
            fields[EXPIRE_AT_FIELD] = clock.now() + COPY_RECORD_RETENTION
        return fields

    if isinstance(store.amend(key, decide), Refusal):
        return _refused(store, subscriber, letter, key)
    log_change(f"replay of dead-letter copy {letter.copy_id} begun", begun, run_key=key)
    try:
        message_id = publish(publisher, job.topic, original)
    except Exception as exc:
        refused = isinstance(exc, REFUSED_PUBLISH)
        ended = entry(
            FAILED if refused else UNKNOWN, by, {**detail, "error": f"{type(exc).__name__}: {exc}"[:500]}
        )
        store.amend(key, lambda record: {ACTIONS_FIELD: appended(record, ended)})
        log_change(f"replay of dead-letter copy {letter.copy_id}: {ended['action']}", ended, run_key=key)
        dead_letters.put_back(subscriber, letter.subscription, [letter.ack_id, *letter.note_ack_ids])
        if refused:
            return Replay(
                "failed", key, f"Pub/Sub refused the publish to {job.topic}: {exc}; the copy stays, try again"
            )
        return Replay(
            "failed",
            key,
            f"the publish to {job.topic} ended without an answer ({type(exc).__name__}: {exc}): the event "
            "may have been published. The copy stays; look for the replayed event before passing --again",
        )
    confirm(store, key, entry(PUBLISHED, by, {**detail, "message_id": message_id}))
    dead_letters.acknowledge(subscriber, letter.subscription, [letter.ack_id, *letter.note_ack_ids])
    return Replay(
        "replayed", key, f"published to {job.topic} as message {message_id}; copy acknowledged", message_id
    )


def confirm(store: Store, key: str, published: dict[str, Any]) -> None:
    """Record that the original was published (step 3)."""
    store.amend(key, lambda record: {ACTIONS_FIELD: appended(record, published)})
    log_change(f"replay of dead-letter copy {published['detail']['copy']} published", published, run_key=key)


def publish(publisher: Any, topic: str, original: Original) -> str:
    """Publish `original` to `topic` as it was; its new messageId."""
    # The generated client's publish takes attributes as a map (see runonce.events.deadletter).
    gapic = importlib.import_module("google.pubsub_v1").PublisherClient
    message: dict[str, Any] = {"data": original.data, "attributes": original.attributes}
    if original.ordering_key:
        message["ordering_key"] = original.ordering_key
    response = gapic.publish(
        publisher, request={"topic": topic, "messages": [message]}, timeout=PUBLISH_SECONDS
    )
    return str(response.message_ids[0])


def _refused(store: Store, subscriber: Any, letter: DeadLetter, key: str) -> Replay:
    last = last_step(store.read(key)) or {}
    detail = last.get("detail") or {}
    held = [letter.ack_id, *letter.note_ack_ids]
    if last.get("action") == PUBLISHED and detail.get("copy") == letter.copy_id:
        # This copy's replay was published and recorded; only its acknowledgement is missing.
        dead_letters.acknowledge(subscriber, letter.subscription, held)
        return Replay(
            "acknowledged",
            key,
            f"copy {letter.copy_id} was replayed at {last.get('at')} by {last.get('by')} (message "
            f"{detail.get('message_id')}) and is acknowledged now; nothing published",
        )
    dead_letters.put_back(subscriber, letter.subscription, held)
    if last.get("action") == PUBLISHED:
        return Replay(
            "refused",
            key,
            f"the event was replayed already at {last.get('at')} by {last.get('by')} (copy "
            f"{detail.get('copy')}, message {detail.get('message_id')}); pass --again to publish it again",
        )
    return Replay(
        "refused",
        key,
        f"a replay of copy {detail.get('copy')} began at {last.get('at')} by {last.get('by')} and was never "
        f"confirmed ({last.get('action')}): it may have been published. Look for the replayed event first "
        "(runonce runs --team T --job J --since ...); pass --again only if it did not run",
    )
