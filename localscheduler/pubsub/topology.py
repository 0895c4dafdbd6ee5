"""The Pub/Sub side of a local event job, on the real emulator: topics, push subscriptions with a
retry policy, an ack deadline and a dead-letter policy, the dead-letter topic with a pull
subscription, publishing, and reading the dead letters back.

The shape is the one the stacks deploy for an event job: the emulator pushes each topic's messages
to an endpoint, redelivers on a nack after the retry policy's backoff (or about the ack deadline
after a push still open), and after `max_delivery_attempts` publishes a copy to the dead-letter
topic itself; the function forwards its own permanent failures and too old events there too.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field
from typing import Any

import google.cloud.pubsub_v1 as pubsub_v1

from runonce.contract import DEAD_LETTER_COPY_ID_ATTRIBUTE
from runonce.events.deadletter import Original, read_copy


@dataclass(frozen=True)
class PushPolicy:
    """How a push subscription delivers: the settings the stacks derive from the team file."""

    ack_deadline_seconds: int = 10
    """The emulator redelivers a push still open after about this long (10 is Pub/Sub's minimum)."""
    minimum_backoff_seconds: int = 1
    maximum_backoff_seconds: int = 1
    max_delivery_attempts: int = 20
    """Pub/Sub dead-letters a message after this many deliveries (5-100)."""


@dataclass(frozen=True)
class DeadLetter:
    """One message read from the dead-letter subscription."""

    message_id: str
    """The copy's own id (a dead-letter copy is a new message)."""
    data: bytes
    attributes: dict[str, str]

    @property
    def note(self) -> bool:
        """runonce's note after a bare copy (the copy's reason), not a copy itself."""
        return DEAD_LETTER_COPY_ID_ATTRIBUTE in self.attributes

    @property
    def original(self) -> Original:
        """The message it is a copy of, whatever the copy's form (see `runonce.events.deadletter`)."""
        return read_copy(self.data, self.attributes)

    @property
    def by_pubsub(self) -> bool:
        """Pub/Sub dead-lettered it after its delivery attempts ran out."""
        return any(name.startswith("CloudPubSubDeadLetterSource") for name in self.attributes)

    @property
    def reason(self) -> str:
        """runonce's reason (`permanent_failure`, `too_old`), or `delivery_attempts` for Pub/Sub's."""
        if self.by_pubsub and "runonce_reason" not in self.attributes:
            return "delivery_attempts"
        return self.attributes.get("runonce_reason", "unknown")


@dataclass
class Topology:
    """Topics and subscriptions of one event job on the emulator (PUBSUB_EMULATOR_HOST)."""

    project: str
    job: str
    """Prefix of every topic and subscription id (ids need at least 3 characters)."""
    publisher: Any = field(default_factory=pubsub_v1.PublisherClient)
    subscriber: Any = field(default_factory=pubsub_v1.SubscriberClient)
    topics: list[str] = field(default_factory=list)
    subscriptions: list[str] = field(default_factory=list)

    @property
    def dead_letter_topic(self) -> str:
        """Where failed, too old and exhausted messages go."""
        return self.publisher.topic_path(self.project, f"{self.job}-dead-letters")

    @property
    def dead_letter_subscription(self) -> str:
        """The pull subscription that keeps the dead letters."""
        return self.subscriber.subscription_path(self.project, f"{self.job}-dead-letters-pull")

    def create_dead_letters(self) -> Topology:
        """The dead-letter topic and the pull subscription that keeps its messages."""
        self.publisher.create_topic(request={"name": self.dead_letter_topic})
        self.subscriber.create_subscription(
            request={"name": self.dead_letter_subscription, "topic": self.dead_letter_topic}
        )
        return self

    def add(self, endpoint: str, policy: PushPolicy) -> tuple[str, str]:
        """A new topic with one push subscription to `endpoint` (one consumer per message),
        dead-lettering to the dead-letter topic; returns (topic, subscription)."""
        number = len(self.topics)
        topic = self.publisher.topic_path(self.project, f"{self.job}-{number}")
        subscription = self.subscriber.subscription_path(self.project, f"{self.job}-{number}-push")
        self.publisher.create_topic(request={"name": topic})
        self.subscriber.create_subscription(
            request={
                "name": subscription,
                "topic": topic,
                "push_config": {"push_endpoint": endpoint},
                "ack_deadline_seconds": policy.ack_deadline_seconds,
                "retry_policy": {
                    "minimum_backoff": {"seconds": policy.minimum_backoff_seconds},
                    "maximum_backoff": {"seconds": policy.maximum_backoff_seconds},
                },
                "dead_letter_policy": {
                    "dead_letter_topic": self.dead_letter_topic,
                    "max_delivery_attempts": policy.max_delivery_attempts,
                },
            }
        )
        self.topics.append(topic)
        self.subscriptions.append(subscription)
        return topic, subscription

    def publish(self, topic: str, data: bytes, attributes: dict[str, str]) -> str:
        """Publish one message and wait for its messageId."""
        return str(self.publisher.publish(topic, data, **attributes).result(timeout=30))

    def pull_dead_letters(self) -> list[DeadLetter]:
        """Every dead letter there right now, acknowledged (so each is read once)."""
        letters: list[DeadLetter] = []
        while True:
            with warnings.catch_warnings():  # the emulator still honours the deprecated flag
                warnings.simplefilter("ignore", DeprecationWarning)
                response = self.subscriber.pull(
                    request={
                        "subscription": self.dead_letter_subscription,
                        "max_messages": 100,
                        "return_immediately": True,
                    },
                    timeout=30,
                )
            received = list(response.received_messages)
            if not received:
                return letters
            letters += [
                DeadLetter(item.message.message_id, item.message.data, dict(item.message.attributes))
                for item in received
            ]
            self.subscriber.acknowledge(
                request={
                    "subscription": self.dead_letter_subscription,
                    "ack_ids": [item.ack_id for item in received],
                }
            )

    def close(self) -> None:
        """Close the clients' channels."""
        self.subscriber.close()
        self.publisher.transport.close()
