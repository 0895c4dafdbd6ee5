"""The dead letters a sandbox test pulls, read with runonce's own parser and attribute names.

A message pulled from a dead-letter subscription has the shape of a push envelope's `message`
(messageId, publishTime, attributes, base64 data), so `runonce.events.parse.parse_push` reads it as it
reads a push, and `runonce.events.deadletter.read_copy` gives back the original it holds; runonce's
`runonce_*` attributes (`runonce.contract`) say why it was dead-lettered. Pub/Sub's own dead letters (delivery
attempts used up) carry `CloudPubSubDeadLetterSource*` attributes instead.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from runonce.contract import (
    DEAD_LETTER_EVENT_ID_ATTRIBUTE,
    DEAD_LETTER_REASON_ATTRIBUTE,
    DEAD_LETTER_RUN_KEY_ATTRIBUTE,
)
from runonce.core.event import Event
from runonce.events.deadletter import Original, read_copy
from runonce.events.parse import parse_push

PUBSUB_DEAD_LETTER_PREFIX = "CloudPubSubDeadLetterSource"


@dataclass(frozen=True)
class DeadLetter:
    """One pulled dead letter: the copy as an `Event`, and the ack id to acknowledge it by."""

    copy: Event
    ack_id: str

    @property
    def reason(self) -> str | None:
        """runonce's reason (a `DeadLetterReason` value); None for Pub/Sub's own dead letter."""
        return self.copy.attributes.get(DEAD_LETTER_REASON_ATTRIBUTE)

    @property
    def run_key(self) -> str | None:
        """The run key of the event it copies (runonce's dead letters only)."""
        return self.copy.attributes.get(DEAD_LETTER_RUN_KEY_ATTRIBUTE)

    @property
    def original_id(self) -> str | None:
        """The messageId the event had (the copy has its own)."""
        return self.copy.attributes.get(DEAD_LETTER_EVENT_ID_ATTRIBUTE)

    @property
    def original(self) -> Original:
        """The message it copies, whatever form runonce published it in (`runonce.events.deadletter`)."""
        return read_copy(self.copy.data, self.copy.attributes)

    @property
    def by_pubsub(self) -> bool:
        """Whether Pub/Sub put it there itself, after the subscription's delivery attempts."""
        return any(name.startswith(PUBSUB_DEAD_LETTER_PREFIX) for name in self.copy.attributes)


def read_dead_letter(received: Mapping[str, Any], subscription: str) -> DeadLetter:
    """One `receivedMessages` entry of a pull answer from `subscription`."""
    envelope = {"message": received["message"], "subscription": subscription}
    return DeadLetter(parse_push(json.dumps(envelope).encode()), received["ackId"])
