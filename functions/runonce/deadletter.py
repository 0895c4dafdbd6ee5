"""Forwarding an event that will not run to the dead-letter topic, so that it is not lost.

The copy keeps the original data and attributes and adds `runonce_*` attributes (see `contract`)
giving the reason, the run key, the attempt, the error, and where the event came from. The
publish is confirmed (its message id returned) before the event is acknowledged; a failure raises
`DeadLetterFailed`, and the adapter then answers so that Pub/Sub keeps the message.

google-cloud-pubsub is loaded by name when the first event function is set up, so functions
that handle no events need not ship it; one that does gets a `ConfigError` saying what to add.
"""

from __future__ import annotations

import importlib
from typing import Any

from google.api_core import exceptions as gexc
from google.api_core.retry import Retry, if_exception_type
from google.auth import exceptions as auth_exceptions

from .contract import (
    DEAD_LETTER_ATTEMPT_ATTRIBUTE,
    DEAD_LETTER_ERROR_ATTRIBUTE,
    DEAD_LETTER_EVENT_ID_ATTRIBUTE,
    DEAD_LETTER_ORIGIN_ATTRIBUTE,
    DEAD_LETTER_REASON_ATTRIBUTE,
    DEAD_LETTER_RUN_KEY_ATTRIBUTE,
    DeadLetterReason,
)
from .errors import ConfigError
from .event import Event
from .text import clip, describe, type_name

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
# Pub/Sub caps an attribute value at 1024 bytes; the error is cut well below.
_MAX_ERROR_ATTRIBUTE = 900
PUBSUB_REQUIREMENT = "google-cloud-pubsub==2.44.0"


class DeadLetterFailed(RuntimeError):
    """The copy could not be published; the event must not be acknowledged."""


def publisher_client() -> Any:
    """A Pub/Sub publisher that sends each message at once (honours PUBSUB_EMULATOR_HOST)."""
    try:
        pubsub = importlib.import_module("google.cloud.pubsub_v1")
    except ImportError:
        raise ConfigError(
            f"google-cloud-pubsub is not installed: an event function forwards dead letters with it; "
            f"add {PUBSUB_REQUIREMENT} to the function's requirements.txt"
        ) from None
    try:
        return pubsub.PublisherClient(batch_settings=pubsub.types.BatchSettings(max_messages=1))
    except auth_exceptions.GoogleAuthError as exc:
        raise ConfigError(
            f"no usable Google Cloud credentials for Pub/Sub ({describe(exc, 300)}): deployed, the "
            "function's service account provides them; locally, set PUBSUB_EMULATOR_HOST for the emulator"
        ) from None


class DeadLetters:
    """Publishes dead-letter copies of events to one topic."""

    def __init__(self, topic: str, publisher: Any):
        self.topic = topic
        self._publisher = publisher

    def forward(self, event: Event, reason: DeadLetterReason, key: str, attempt: int, error: str) -> str:
        """Publish the copy and wait for Pub/Sub to confirm it; its message id, or DeadLetterFailed."""
        attributes = {
            **event.attributes,
            DEAD_LETTER_REASON_ATTRIBUTE: reason.value,
            DEAD_LETTER_RUN_KEY_ATTRIBUTE: key,
            DEAD_LETTER_ATTEMPT_ATTRIBUTE: str(attempt),
            DEAD_LETTER_ERROR_ATTRIBUTE: clip(error, _MAX_ERROR_ATTRIBUTE),
            DEAD_LETTER_ORIGIN_ATTRIBUTE: event.source,
            DEAD_LETTER_EVENT_ID_ATTRIBUTE: event.id,
        }
        try:
            future = self._publisher.publish(
                self.topic, event.data, retry=_RETRY, timeout=FORWARD_SECONDS, **attributes
            )
            return str(future.result(timeout=FORWARD_SECONDS + 2.0))
        except Exception as exc:
            raise DeadLetterFailed(
                f"publishing to {self.topic} failed ({type_name(exc)}: {describe(exc, 500)})"
            ) from exc
