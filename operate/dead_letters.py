"""`runonce dead-letters`: the copies in an event job's dead-letter subscription, read without
acknowledging them.

Two kinds arrive there. runonce's copies (`runonce.events.deadletter`: plain, wrapped, or bare
with a note after it) carry `runonce_*` attributes: the reason, the run key, the attempt, the
error. Pub/Sub's own, published when a message used up the push subscription's delivery
attempts, carry the original data and attributes plus `CloudPubSubDeadLetterSource*` ones
(the delivery count, the source subscription; Pub/Sub's "Dead-letter topics" page,
https://cloud.google.com/pubsub/docs/handling-failures).

Messages are pulled (`returnImmediately`, so an empty subscription answers at once) until none
is left, then put back with a zero ack deadline, which makes them available again at once (the
DeadLetterPolicy reference counts such a call as a NACK; the dead-letter subscription itself has
no dead-letter policy, so that count does nothing there).
"""

from __future__ import annotations

import warnings
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from google.api_core import exceptions as gexc

from operate.clients import Unavailable
from operate.team import EventJob
from runonce.contract import (
    DEAD_LETTER_ATTEMPT_ATTRIBUTE,
    DEAD_LETTER_COPY_ID_ATTRIBUTE,
    DEAD_LETTER_ERROR_ATTRIBUTE,
    DEAD_LETTER_REASON_ATTRIBUTE,
    DEAD_LETTER_RUN_KEY_ATTRIBUTE,
    DEAD_LETTER_WRAPPED_ATTRIBUTE,
    DeadLetterForm,
)
from runonce.events.deadletter import Original, read_copy

PUBSUB_PREFIX = "CloudPubSubDeadLetterSource"
DELIVERY_COUNT_ATTRIBUTE = "CloudPubSubDeadLetterSourceDeliveryCount"
SOURCE_SUBSCRIPTION_ATTRIBUTE = "CloudPubSubDeadLetterSourceSubscription"
RUNONCE = "runonce"
PUBSUB = "pubsub"
MAX_PULLS = 50
"""Pulls of up to 100 messages each before a listing stops (5,000 copies)."""
HOLD_SECONDS = 60
"""How long a pulled copy is kept from other readers while a replay works on it."""


@dataclass
class DeadLetter:
    """One copy in a dead-letter subscription."""

    job: str
    subscription: str
    copy_id: str
    """The copy's messageId: what `runonce replay` takes."""
    ack_id: str
    kind: str
    """`runonce` (its own copy) or `pubsub` (delivery attempts used up)."""
    form: str
    reason: str
    run_key: str
    """The original event's run key (runonce's copies), "" for Pub/Sub's."""
    attempt: str
    error: str
    delivery_count: str
    """Pub/Sub's copies: the deliveries the message had, and the subscription it came from."""
    source_subscription: str
    published: str
    original: Original | None
    """The message to replay; None if the copy's data cannot be read (`unreadable` says why)."""
    unreadable: str = ""
    note_ack_ids: list[str] = field(default_factory=list)
    """The notes that follow a bare copy: acknowledged with it."""

    def json(self) -> dict[str, Any]:
        """The copy as JSON-ready values, its original's attributes and size."""
        return {
            "job": self.job,
            "copy_id": self.copy_id,
            "kind": self.kind,
            "form": self.form,
            "reason": self.reason,
            "run_key": self.run_key,
            "attempt": self.attempt,
            "error": self.error,
            "delivery_count": self.delivery_count,
            "source_subscription": self.source_subscription,
            "published": self.published,
            "original_attributes": self.original.attributes if self.original else None,
            "original_bytes": len(self.original.data) if self.original else None,
            "unreadable": self.unreadable,
        }


def pull_all(subscriber: Any, subscription: str) -> list[Any]:
    """Every message in `subscription` now (ReceivedMessage, each once), leased to this reader."""
    seen: dict[str, Any] = {}
    for _ in range(MAX_PULLS):
        with warnings.catch_warnings():  # returnImmediately is deprecated, and still what we need
            warnings.simplefilter("ignore", DeprecationWarning)
            try:
                response = subscriber.pull(
                    request={"subscription": subscription, "max_messages": 100, "return_immediately": True},
                    timeout=30,
                )
            except gexc.NotFound:
                raise Unavailable(
                    f"the dead-letter subscription {subscription} does not exist: is the team's stack "
                    "deployed to that project (make deploy STACK=<team>)?"
                ) from None
            except gexc.GoogleAPICallError as exc:
                raise Unavailable(f"pulling from {subscription}: {type(exc).__name__}: {exc}") from None
        fresh = [item for item in response.received_messages if item.message.message_id not in seen]
        # A message delivered again (its ack deadline passed during the listing) keeps its latest
        # ack id: an older one no longer acknowledges it.
        seen.update((item.message.message_id, item) for item in response.received_messages)
        if not fresh:
            break
    return list(seen.values())


def put_back(subscriber: Any, subscription: str, ack_ids: Iterable[str]) -> None:
    """Make pulled messages available again at once (ack deadline 0)."""
    ids = list(ack_ids)
    if ids:
        subscriber.modify_ack_deadline(
            request={"subscription": subscription, "ack_ids": ids, "ack_deadline_seconds": 0}
        )


def acknowledge(subscriber: Any, subscription: str, ack_ids: Iterable[str]) -> None:
    """Remove pulled messages from the subscription."""
    ids = list(ack_ids)
    if ids:
        subscriber.acknowledge(request={"subscription": subscription, "ack_ids": ids})


def read(job: EventJob, received: list[Any]) -> list[DeadLetter]:
    """The copies among `received` (notes folded into their bare copies), oldest first."""
    notes: dict[str, Any] = {}
    copies = []
    for item in received:
        attributes = dict(item.message.attributes)
        if DEAD_LETTER_COPY_ID_ATTRIBUTE in attributes:
            notes[attributes[DEAD_LETTER_COPY_ID_ATTRIBUTE]] = item
        else:
            copies.append(item)
    letters = []
    for item in copies:
        note = notes.pop(item.message.message_id, None)
        letters.append(_letter(job, item, note))
    for copy_id, note in notes.items():  # a note whose copy was taken already: shown, so it can be seen
        letters.append(_orphan_note(job, copy_id, note))
    return sorted(letters, key=lambda letter: letter.published)


def _letter(job: EventJob, item: Any, note: Any) -> DeadLetter:
    message = item.message
    attributes = dict(message.attributes)
    notes = dict(note.message.attributes) if note is not None else attributes
    original: Original | None
    unreadable = ""
    if note is not None:
        kind, form = RUNONCE, DeadLetterForm.BARE.value
        original = Original(bytes(message.data), attributes, message.ordering_key)
    elif DEAD_LETTER_REASON_ATTRIBUTE in attributes:
        kind = RUNONCE
        wrapped = DEAD_LETTER_WRAPPED_ATTRIBUTE in attributes
        form = (DeadLetterForm.WRAPPED if wrapped else DeadLetterForm.PLAIN).value
        try:
            original = read_copy(bytes(message.data), attributes)
        except Exception as exc:  # a wrapped copy whose data is not a PubsubMessage
            original, unreadable = None, f"its data is not a serialized PubsubMessage ({type(exc).__name__})"
    else:
        kind, form = PUBSUB, "pubsub"
        kept = {name: value for name, value in attributes.items() if not name.startswith(PUBSUB_PREFIX)}
        original = Original(bytes(message.data), kept, message.ordering_key)
    return DeadLetter(
        job=job.name,
        subscription=job.dead_letter_subscription,
        copy_id=message.message_id,
        ack_id=item.ack_id,
        kind=kind,
        form=form,
        reason=notes.get(DEAD_LETTER_REASON_ATTRIBUTE)
        or ("max_delivery_attempts" if DELIVERY_COUNT_ATTRIBUTE in attributes else "unknown"),
        run_key=notes.get(DEAD_LETTER_RUN_KEY_ATTRIBUTE, ""),
        attempt=notes.get(DEAD_LETTER_ATTEMPT_ATTRIBUTE, ""),
        error=notes.get(DEAD_LETTER_ERROR_ATTRIBUTE, ""),
        delivery_count=attributes.get(DELIVERY_COUNT_ATTRIBUTE, ""),
        source_subscription=attributes.get(SOURCE_SUBSCRIPTION_ATTRIBUTE, ""),
        published=message.publish_time.isoformat(),
        original=original,
        unreadable=unreadable,
        note_ack_ids=[note.ack_id] if note is not None else [],
    )


def _orphan_note(job: EventJob, copy_id: str, note: Any) -> DeadLetter:
    attributes = dict(note.message.attributes)
    return DeadLetter(
        job=job.name,
        subscription=job.dead_letter_subscription,
        copy_id=note.message.message_id,
        ack_id=note.ack_id,
        kind=RUNONCE,
        form="note",
        reason=attributes.get(DEAD_LETTER_REASON_ATTRIBUTE, ""),
        run_key=attributes.get(DEAD_LETTER_RUN_KEY_ATTRIBUTE, ""),
        attempt=attributes.get(DEAD_LETTER_ATTEMPT_ATTRIBUTE, ""),
        error=f"the note of copy {copy_id}, which is no longer in the subscription",
        delivery_count="",
        source_subscription="",
        published=note.message.publish_time.isoformat(),
        original=Original(b"", {}),
    )


def listing(subscriber: Any, jobs: Iterable[EventJob]) -> list[DeadLetter]:
    """Every copy in the jobs' dead-letter subscriptions, each put back after reading."""
    letters = []
    for job in jobs:
        received = pull_all(subscriber, job.dead_letter_subscription)
        try:
            letters += read(job, received)
        finally:
            put_back(subscriber, job.dead_letter_subscription, [item.ack_id for item in received])
    return letters


def take(subscriber: Any, jobs: Iterable[EventJob], copy_id: str) -> DeadLetter | None:
    """The copy `copy_id`, kept leased (`HOLD_SECONDS`) for the caller to acknowledge or put
    back; every other message is put back at once. None if no subscription has it."""
    found = None
    for job in jobs:
        received = pull_all(subscriber, job.dead_letter_subscription)
        keep: set[str] = set()
        for letter in read(job, received):
            if found is None and letter.copy_id == copy_id and letter.form != "note":
                found = letter
                keep = {letter.ack_id, *letter.note_ack_ids}
        put_back(
            subscriber, job.dead_letter_subscription, [i.ack_id for i in received if i.ack_id not in keep]
        )
        if found is not None:
            subscriber.modify_ack_deadline(
                request={
                    "subscription": job.dead_letter_subscription,
                    "ack_ids": sorted(keep),
                    "ack_deadline_seconds": HOLD_SECONDS,
                }
            )
            return found
    return None
