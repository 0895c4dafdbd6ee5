"""Forwarding an event that will not run to the dead-letter topic, so that it is not lost.

The copy holds the original data and attributes byte for byte, and runonce's reason in
`runonce_*` attributes (see `runonce.contract`), in the first form that fits Pub/Sub's limits (quotas page,
"Resource limits": 100 attributes, keys of 256 bytes, values of 1,024, keys starting with `goog`
reserved; a publish request of 10,000,000 bytes, which the client library checks too):

- plain: the original data and attributes plus runonce's, when they fit beside the original's and
  the original has no ordering key, no `runonce_` key, and nothing Pub/Sub would refuse;
- wrapped: data is the original serialized as a `google.pubsub.v1.PubsubMessage` (data,
  attributes, ordering key), attributes are runonce's alone (the error, origin and id dropped
  first if even that is too big);
- bare: exactly the original, for one within a few hundred bytes of the size limit; a note
  (runonce's attributes and the copy's messageId, no data) is published after it.

`read_copy` gives back the original of any copy. Each publish is confirmed (its message id
returned) before the event is acknowledged; a failure raises `DeadLetterFailed`, and the adapter
then answers so that Pub/Sub keeps the message. google-cloud-pubsub is loaded by name when the
first event function is set up, so functions that handle no events need not ship it; one that
does gets a `ConfigError` saying what to add.
"""

from __future__ import annotations

import importlib
import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from google.api_core import exceptions as gexc
from google.api_core.retry import Retry, if_exception_type
from google.auth import exceptions as auth_exceptions

from .._logs import log
from .._text import MAX_ERROR_CHARS, clip, describe, type_name
from ..contract import (
    DEAD_LETTER_ATTEMPT_ATTRIBUTE,
    DEAD_LETTER_ATTRIBUTE_PREFIX,
    DEAD_LETTER_COPY_ID_ATTRIBUTE,
    DEAD_LETTER_ERROR_ATTRIBUTE,
    DEAD_LETTER_EVENT_ID_ATTRIBUTE,
    DEAD_LETTER_ORIGIN_ATTRIBUTE,
    DEAD_LETTER_REASON_ATTRIBUTE,
    DEAD_LETTER_RUN_KEY_ATTRIBUTE,
    DEAD_LETTER_WRAPPED_ATTRIBUTE,
    DeadLetterForm,
    DeadLetterReason,
)
from ..core.errors import ConfigError, RunonceError
from ..core.event import Event

# Seconds one forwarding may take, retries included; the push ack deadline is at least 10 s.
FORWARD_SECONDS = 8.0
_RETRY = Retry(
    predicate=if_exception_type(
        gexc.ServiceUnavailable,
        gexc.DeadlineExceeded,
        gexc.InternalServerError,
        gexc.Aborted,
        gexc.Unknown,
        gexc.ResourceExhausted,
    ),
    initial=0.1,
    maximum=2.0,
    multiplier=2.0,
    timeout=FORWARD_SECONDS - 1.0,
)
PUBSUB_REQUIREMENT = "google-cloud-pubsub==2.44.0"

# Pub/Sub's limits on one message (https://cloud.google.com/pubsub/quotas#resource_limits) and on a
# publish request (google-cloud-pubsub refuses a larger one: `_SERVER_PUBLISH_MAX_BYTES`).
MAX_ATTRIBUTES = 100
MAX_KEY_BYTES = 256
MAX_VALUE_BYTES = 1024
MAX_REQUEST_BYTES = 10_000_000
RESERVED_PREFIX = "goog"
WRAPPED_TYPE = "google.pubsub.v1.PubsubMessage"


class DeadLetterFailed(RunonceError, RuntimeError):
    """The copy could not be published; the event must not be acknowledged."""


@dataclass(frozen=True)
class Forwarded:
    """A copy Pub/Sub confirmed: its messageId and its form."""

    message_id: str
    form: DeadLetterForm


@dataclass(frozen=True)
class Original:
    """The message a dead-letter copy holds, to publish again to its topic as it was."""

    data: bytes
    attributes: dict[str, str]
    ordering_key: str = ""


def publisher_client() -> Any:
    """A Pub/Sub publisher (honours PUBSUB_EMULATOR_HOST)."""
    try:
        pubsub = importlib.import_module("google.cloud.pubsub_v1")
    except ImportError:
        raise ConfigError(
            f"google-cloud-pubsub is not installed: an event function forwards dead letters with it; "
            f"add {PUBSUB_REQUIREMENT} to the function's requirements.txt"
        ) from None
    try:
        return pubsub.PublisherClient()
    except auth_exceptions.GoogleAuthError as exc:
        raise ConfigError(
            f"no usable Google Cloud credentials for Pub/Sub ({describe(exc, 300)}): deployed, the "
            "function's service account provides them; locally, set PUBSUB_EMULATOR_HOST for the emulator"
        ) from None


def _types() -> Any:
    return importlib.import_module("google.pubsub_v1").types


def clip_bytes(text: str, limit: int) -> str:
    """`text` as valid UTF-8 of at most `limit` bytes, a marker saying how much was cut."""
    text = clip(text, MAX_ERROR_CHARS)
    encoded = text.encode("utf-8")
    if len(encoded) <= limit:
        return text
    marker = f"… [{len(encoded)} bytes, cut]"
    kept = encoded[: max(limit - len(marker.encode("utf-8")), 0)].decode("utf-8", "ignore")
    return kept + marker


def publishable(attributes: Mapping[str, str]) -> bool:
    """Whether Pub/Sub accepts these attributes: their number, sizes, encoding and reserved keys."""
    if len(attributes) > MAX_ATTRIBUTES:
        return False
    try:
        return all(
            0 < len(key.encode("utf-8")) <= MAX_KEY_BYTES
            and len(value.encode("utf-8")) <= MAX_VALUE_BYTES
            and not key.lower().startswith(RESERVED_PREFIX)
            for key, value in attributes.items()
        )
    except UnicodeEncodeError:
        return False


def request_bytes(topic: str, data: bytes, attributes: Mapping[str, str]) -> int:
    """The size of the publish request that sends this one message to `topic`."""
    types = _types()
    message = types.PubsubMessage(data=data, attributes=dict(attributes))
    return types.PublishRequest.pb(types.PublishRequest(topic=topic, messages=[message])).ByteSize()


def _fits(topic: str, data: bytes, attributes: Mapping[str, str]) -> bool:
    return (
        bool(data or attributes)  # Pub/Sub refuses a message with neither
        and publishable(attributes)
        and request_bytes(topic, data, attributes) <= MAX_REQUEST_BYTES
    )


@dataclass(frozen=True)
class Copy:
    """What is published for one event: the copy, and for a bare one the note that follows it."""

    form: DeadLetterForm
    data: bytes
    attributes: dict[str, str]
    note: dict[str, str] | None = None


def build_copy(
    topic: str, event: Event, reason: DeadLetterReason, key: str, attempt: int, error: str
) -> Copy:
    """The first form of the copy that fits Pub/Sub's limits; DeadLetterFailed if none does."""
    full = {
        DEAD_LETTER_REASON_ATTRIBUTE: reason.value,
        DEAD_LETTER_RUN_KEY_ATTRIBUTE: key,
        DEAD_LETTER_ATTEMPT_ATTRIBUTE: str(attempt),
        DEAD_LETTER_ERROR_ATTRIBUTE: clip_bytes(error, MAX_VALUE_BYTES),
        DEAD_LETTER_ORIGIN_ATTRIBUTE: clip_bytes(event.source, MAX_VALUE_BYTES),
        DEAD_LETTER_EVENT_ID_ATTRIBUTE: clip_bytes(event.id, MAX_VALUE_BYTES),
    }
    original = event.attributes
    as_is = not event.ordering_key and publishable(original)
    if as_is and not any(name.startswith(DEAD_LETTER_ATTRIBUTE_PREFIX) for name in original):
        plain = {**original, **full}
        if _fits(topic, event.data, plain):
            return Copy(DeadLetterForm.PLAIN, event.data, plain)
    types = _types()
    wrapped = types.PubsubMessage.serialize(
        types.PubsubMessage(data=event.data, attributes=original, ordering_key=event.ordering_key)
    )
    short = {name: full[name] for name in (DEAD_LETTER_REASON_ATTRIBUTE, DEAD_LETTER_RUN_KEY_ATTRIBUTE)}
    for notes in (full, short):
        attributes = {**notes, DEAD_LETTER_WRAPPED_ATTRIBUTE: WRAPPED_TYPE}
        if _fits(topic, wrapped, attributes):
            return Copy(DeadLetterForm.WRAPPED, wrapped, attributes)
    if as_is and _fits(topic, event.data, original):
        return Copy(DeadLetterForm.BARE, event.data, dict(original), full)
    raise DeadLetterFailed(
        f"the event cannot be copied to {topic} within Pub/Sub's limits (it is too close to "
        f"{MAX_REQUEST_BYTES} bytes and has an ordering key or attributes Pub/Sub refuses)"
    )


def read_copy(data: bytes, attributes: Mapping[str, str]) -> Original:
    """The original message of a dead-letter copy, whatever its form (a note has none: its copy has)."""
    if attributes.get(DEAD_LETTER_WRAPPED_ATTRIBUTE) == WRAPPED_TYPE:
        message = _types().PubsubMessage.deserialize(data)
        return Original(bytes(message.data), dict(message.attributes), message.ordering_key)
    kept = {
        name: value for name, value in attributes.items() if not name.startswith(DEAD_LETTER_ATTRIBUTE_PREFIX)
    }
    return Original(data, kept)


class DeadLetters:
    """Publishes dead-letter copies of events to one topic."""

    def __init__(self, topic: str, publisher: Any):
        self.topic = topic
        self._publisher = publisher

    def forward(
        self, event: Event, reason: DeadLetterReason, key: str, attempt: int, error: str
    ) -> Forwarded:
        """Publish the copy and wait for Pub/Sub to confirm it; what was published, or DeadLetterFailed."""
        try:
            copy = build_copy(self.topic, event, reason, key, attempt, error)
            message_id = self._publish(copy.data, copy.attributes)
        except DeadLetterFailed:
            raise
        except Exception as exc:
            raise DeadLetterFailed(
                f"publishing to {self.topic} failed ({type_name(exc)}: {describe(exc, 500)})"
            ) from exc
        if copy.note is not None:
            try:
                self._publish(b"", {**copy.note, DEAD_LETTER_COPY_ID_ATTRIBUTE: message_id})
            except Exception as exc:  # the copy is safe and the record keeps the reason
                log(logging.ERROR, f"bare dead-letter copy published, its note not: {describe(exc, 500)}")
        return Forwarded(message_id, copy.form)

    def _publish(self, data: bytes, attributes: dict[str, str]) -> str:
        # The generated client's publish takes the attributes as a map, never as keyword arguments
        # (the library's own publish would take an attribute named `topic` or `retry` for its own).
        gapic = importlib.import_module("google.pubsub_v1").PublisherClient
        response = gapic.publish(
            self._publisher,
            request={"topic": self.topic, "messages": [{"data": data, "attributes": attributes}]},
            retry=_RETRY,
            timeout=FORWARD_SECONDS,
        )
        return str(response.message_ids[0])
