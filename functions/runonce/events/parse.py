"""What one event says, read from a Pub/Sub push request or a CloudEvent, and its run key.

Both shapes become one `Event`, so a job reads the same fields whatever delivered it. Nothing
here touches the store: a push body that is not a push envelope is rejected before any write.
"""

from __future__ import annotations

import base64
import binascii
import json
import re
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from google.api_core.datetime_helpers import DatetimeWithNanoseconds

from .._instant import parse_instant
from ..core.event import Event
from ..core.fields import BadField, read_text
from ..core.occurrence import KEY_VERSION, key_digest

# The CloudEvent type Eventarc gives a Pub/Sub message; its data is a push envelope.
PUBSUB_CLOUDEVENT_TYPE = "google.cloud.pubsub.topic.v1.messagePublished"
# Generous bounds on what becomes part of a run key or a log line.
MAX_ID_LENGTH = 1024
MAX_ORIGIN_LENGTH = 1024
# RFC 3339 allows any number of fraction digits; a datetime holds nine at most (as nanoseconds).
_BEYOND_NANOSECONDS = re.compile(r"(\.[0-9]{9})[0-9]+(?=[Zz+-])")


class BadEnvelope(BadField):
    """The request body is not a Pub/Sub push envelope; answered 400, nothing is written."""

    MISSING = "missing; is this a Pub/Sub push request?"


def event_key(event: Event, consumer: str = "") -> str:
    """SHA-256 of the JSON list [version, "pubsub", subscription, id] or [version, "cloudevent",
    consumer, source, id]: a push subscription names its consumer; a CloudEvent's source and id are
    the same for every trigger it reaches, so the consumer (the function) joins them."""
    parts = [KEY_VERSION, event.kind, event.source, event.id]
    if event.kind == "cloudevent":
        parts.insert(2, consumer)
    return key_digest(parts)


def read_time(text: str, field: str) -> datetime:
    """An RFC 3339 timestamp (any fraction, `T`/`Z` in either case, any offset) in UTC, to the
    nanosecond; BadEnvelope naming `field` if it is not one."""
    try:
        instant = parse_instant(_BEYOND_NANOSECONDS.sub(r"\1", text, count=1))
    except ValueError as exc:
        raise BadEnvelope(field, str(exc)) from None
    utc = instant.utc
    return DatetimeWithNanoseconds(
        utc.year, utc.month, utc.day, utc.hour, utc.minute, utc.second, nanosecond=instant.nanos, tzinfo=UTC
    )


def _message(message: object, where: str) -> tuple[str, datetime, dict[str, str], bytes, str]:
    """(messageId, publishTime, attributes, data, orderingKey) of a push envelope's `message`."""
    if not isinstance(message, Mapping):
        raise BadEnvelope(where, "missing or not an object; is this a Pub/Sub push request?")
    # The real service sends both spellings of the id and the time; the emulator sends camelCase.
    message_id = read_text(
        message.get("messageId") or message.get("message_id"), f"{where}.messageId", 200, BadEnvelope
    )
    raw_time = read_text(
        message.get("publishTime") or message.get("publish_time"), f"{where}.publishTime", 64, BadEnvelope
    )
    published = read_time(raw_time, f"{where}.publishTime")
    attributes = message.get("attributes") or {}
    if not isinstance(attributes, Mapping) or not all(
        isinstance(key, str) and isinstance(value, str) for key, value in attributes.items()
    ):
        raise BadEnvelope(f"{where}.attributes", "is not an object of string values")
    if not all(_encodable(key) and _encodable(value) for key, value in attributes.items()):
        # Pub/Sub's strings are UTF-8: such an attribute could be neither stored nor dead-lettered.
        raise BadEnvelope(f"{where}.attributes", "holds text that is not valid UTF-8 (a lone surrogate)")
    ordering_key = message.get("orderingKey") or message.get("ordering_key") or ""
    if not isinstance(ordering_key, str) or not _encodable(ordering_key):
        raise BadEnvelope(f"{where}.orderingKey", "is not a UTF-8 string")
    raw_data = message.get("data") or ""
    if not isinstance(raw_data, str):
        raise BadEnvelope(f"{where}.data", f"is a {type(raw_data).__name__}, not a base64 string")
    try:
        data = base64.b64decode(raw_data, validate=True)
    except (binascii.Error, ValueError):
        raise BadEnvelope(f"{where}.data", "is not valid base64") from None
    return message_id, published, dict(attributes), data, ordering_key


def _encodable(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def parse_push(body: bytes) -> Event:
    """Read a Pub/Sub push request body; BadEnvelope names the field and what is wrong."""
    try:
        envelope = json.loads(body)
    except (ValueError, UnicodeDecodeError):
        raise BadEnvelope("body", "is not JSON; a Pub/Sub push request sends a JSON envelope") from None
    if not isinstance(envelope, Mapping):
        raise BadEnvelope("body", "is not a JSON object; is this a Pub/Sub push request?")
    message_id, published, attributes, data, ordering_key = _message(envelope.get("message"), "message")
    subscription = read_text(envelope.get("subscription"), "subscription", MAX_ORIGIN_LENGTH, BadEnvelope)
    attempt = envelope.get("deliveryAttempt")
    if attempt is not None and (isinstance(attempt, bool) or not isinstance(attempt, int) or attempt < 1):
        raise BadEnvelope("deliveryAttempt", f"{attempt!r} is not a whole number of at least 1")
    return Event(message_id, subscription, published, attributes, data, attempt, "pubsub", ordering_key)


def from_cloud_event(cloud_event: Any) -> Event:
    """The Event of a `cloudevents` CloudEvent (what `@functions_framework.cloud_event` passes).

    A Pub/Sub CloudEvent is unwrapped: its data and attributes are the message's. Any other
    CloudEvent's data is kept as bytes (JSON-encoded if it arrived decoded) with its context
    attributes as the attributes.
    """
    context = {key: str(value) for key, value in cloud_event.get_attributes().items()}
    for key, value in context.items():
        if not (_encodable(key) and _encodable(value)):
            raise BadEnvelope(key, "holds text that is not valid UTF-8 (a lone surrogate)")
    event_id, source = context.get("id", ""), context.get("source", "")
    if not event_id or not source:
        raise BadEnvelope("id" if not event_id else "source", "missing from the CloudEvent")
    event_id = read_text(event_id, "id", MAX_ID_LENGTH, BadEnvelope)
    source = read_text(source, "source", MAX_ORIGIN_LENGTH, BadEnvelope)
    time = read_time(context["time"], "time") if context.get("time") else None
    payload = cloud_event.data
    if context.get("type") == PUBSUB_CLOUDEVENT_TYPE and isinstance(payload, Mapping):
        try:
            _, _, attributes, data, ordering_key = _message(payload.get("message"), "data.message")
        except BadEnvelope:
            pass  # not the shape Eventarc documents: keep the CloudEvent as it is
        else:
            return Event(event_id, source, time, attributes, data, None, "cloudevent", ordering_key)
    return Event(event_id, source, time, context, _bytes(payload), None, "cloudevent")


def _bytes(payload: Any) -> bytes:
    if payload is None:
        return b""
    if isinstance(payload, bytes):
        return payload
    if isinstance(payload, str):
        return payload.encode("utf-8", "surrogatepass")  # the data as sent, even a lone surrogate
    return json.dumps(payload, separators=(",", ":"), default=str).encode("utf-8")


def is_cloud_event_request(headers: Mapping[str, str]) -> bool:
    """Whether an HTTP request carries a CloudEvent (CloudEvents' HTTP binding): in binary mode
    its context attributes are `ce-` headers, in structured mode its content type says so."""
    content_type = headers.get("Content-Type") or ""
    return bool(headers.get("ce-specversion")) or content_type.startswith("application/cloudevents")


def from_http_request(headers: Mapping[str, str], body: bytes) -> Event:
    """The Event of a CloudEvent sent over HTTP (Eventarc to a Cloud Run service), read by the
    `cloudevents` SDK's `from_http`; BadEnvelope if the SDK cannot read one."""
    from cloudevents.exceptions import GenericException
    from cloudevents.http import from_http

    try:
        cloud_event = from_http(dict(headers.items()), body)
    except GenericException as exc:
        raise BadEnvelope("ce-*", f"is not a CloudEvent the cloudevents SDK can read ({exc})") from None
    return from_cloud_event(cloud_event)
