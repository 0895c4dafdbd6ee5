"""What an event job receives and runs as: the `Event`, the `EventRun` that `current_run()`
returns for it, and the event settings (`EventSettings`) beyond the ledger's.

A scheduled function never loads this module: its types and patterns are the event path's alone.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from ..contract import (
    CONSUMER_VARIABLE,
    DEAD_LETTER_TOPIC_VARIABLE,
    JOB_VARIABLE,
    MAX_EVENT_AGE_VARIABLE,
    PROJECT_VARIABLE,
    RETENTION_VARIABLE,
)
from .errors import ConfigError
from .settings import Settings, picker, seconds_setting, shown

# An event older than this is not run but dead-lettered: Google's "end condition" for retried
# events, so one that keeps failing does not loop until its retention ends.
DEFAULT_MAX_EVENT_AGE_SECONDS = 24 * 3600
# Pub/Sub keeps an unacknowledged message 7 days at most: no retry window is longer.
MAX_RETRY_WINDOW_SECONDS = 7 * 24 * 3600
# A consumer names a function: generous next to Cloud Run's 63-character service names.
MAX_CONSUMER_LENGTH = 1024


@dataclass(frozen=True)
class Event:
    """The event a job receives, from Pub/Sub push or a CloudEvent alike."""

    id: str
    """Pub/Sub messageId, or the CloudEvent id."""
    source: str
    """The push subscription (`projects/P/subscriptions/S`), or the CloudEvent source."""
    time: datetime | None
    """When it was published (publishTime) or happened (CloudEvent time), in UTC, to the nanosecond
    (a `DatetimeWithNanoseconds`: its `.nanosecond` keeps what `.microsecond` cannot); None if unknown."""
    attributes: dict[str, str] = field(default_factory=dict)
    """The message attributes (Pub/Sub), or the CloudEvent's context attributes."""
    data: bytes = b""
    """The payload: the message data decoded from base64, or the CloudEvent data as sent."""
    delivery_attempt: int | None = None
    """Pub/Sub's count of deliveries (only with a dead-letter policy, never on the emulator)."""
    kind: str = "pubsub"
    """`pubsub` (a push request) or `cloudevent`."""
    ordering_key: str = ""
    """The message's ordering key (Pub/Sub), kept so that a dead-letter copy can be replayed with it."""

    def json(self) -> Any:
        """The data decoded as UTF-8 JSON; ValueError if it is not JSON."""
        return json.loads(self.data.decode("utf-8"))

    def text(self) -> str:
        """The data decoded as UTF-8 (undecodable bytes replaced)."""
        return self.data.decode("utf-8", "replace")


@dataclass(frozen=True)
class EventRun:
    """The handling of one event (`@deduplicated_event`), as `current_run()` returns it."""

    key: str
    event: Event
    """The event being handled: its id, source, time, attributes, data and delivery attempt."""
    consumer: str
    """The consumer setting (the `consumer` option, else K_SERVICE; "" if neither): part of a
    CloudEvent's run key (a push subscription names its consumer itself)."""
    attempt_id: str
    attempt: int


# Pub/Sub topic ids: 3-255 characters, a letter first, not starting with "goog".
_TOPIC_ID = re.compile(r"[A-Za-z][A-Za-z0-9._~+%-]{2,254}")
_TOPIC_PATH = re.compile(r"projects/(?P<project>[^/]+)/topics/(?P<topic>[^/]+)")


@dataclass(frozen=True)
class EventSettings:
    """What an event function needs beyond `Settings`."""

    max_event_age: timedelta
    """An event older than this (from its publish or event time) is dead-lettered, not run."""
    dead_letter_topic: str
    """Full topic path (`projects/P/topics/T`) that failed and too old events are forwarded to."""
    consumer: str = ""
    """Who handles the events (the Cloud Run service, K_SERVICE): part of a CloudEvent's run key, so
    two functions triggered by one event each run it once."""
    job: str = ""
    """The job the events are for, the `job` field of every log line (the `job` option, else
    RUNONCE_JOB, else the consumer; "" if none is set)."""


def load_event_settings(
    settings: Settings,
    overrides: Mapping[str, object] | None = None,
    environ: Mapping[str, str] | None = None,
    project: str | None = None,
) -> EventSettings:
    """The event settings, validated against `settings`; ConfigError names the setting and the fix.

    `project` completes a dead-letter topic given by its id alone (the settings' project wins).
    """
    pick = picker(overrides, environ)
    max_age = seconds_setting(
        *pick("max_event_age", MAX_EVENT_AGE_VARIABLE, DEFAULT_MAX_EVENT_AGE_SECONDS),
        1,
        MAX_RETRY_WINDOW_SECONDS,
        DEFAULT_MAX_EVENT_AGE_SECONDS,
    )
    if settings.retention <= max_age:
        raise ConfigError(
            f"retention ({int(settings.retention.total_seconds())} s) must be longer than the maximum "
            f"event age ({int(max_age.total_seconds())} s), or a redelivery of an event still young "
            f"enough to run could find its record deleted and run it again: raise {RETENTION_VARIABLE} "
            f"or lower {MAX_EVENT_AGE_VARIABLE}"
        )
    name, raw = pick("dead_letter_topic", DEAD_LETTER_TOPIC_VARIABLE, "")
    topic = str(raw).strip()
    if not topic:
        raise ConfigError(
            f"{DEAD_LETTER_TOPIC_VARIABLE} is not set: an event that fails permanently or arrives too "
            "old is forwarded there so it is not lost; set it (or the dead_letter_topic option) to "
            "projects/PROJECT/topics/TOPIC"
        )
    path = _TOPIC_PATH.fullmatch(topic)
    topic_id = path["topic"] if path else topic
    if not _TOPIC_ID.fullmatch(topic_id) or topic_id.lower().startswith("goog"):
        raise ConfigError(
            f"{name}={shown(raw)} is not a Pub/Sub topic: use projects/PROJECT/topics/TOPIC, the topic "
            "id being 3-255 letters, digits and - _ . ~ + %, starting with a letter, not with goog"
        )
    if path is None:
        owner = settings.project or project
        if not owner:
            raise ConfigError(
                f"{name}={shown(raw)} names no project and none is known: write "
                f"projects/PROJECT/topics/{topic_id}, or set {PROJECT_VARIABLE}"
            )
        topic = f"projects/{owner}/topics/{topic_id}"
    consumer = _name_setting(
        pick, "consumer", CONSUMER_VARIABLE, "name the function (a Cloud Run service name has at most 63)"
    )
    job = _name_setting(pick, "job", JOB_VARIABLE, "name the job as its team file does")
    return EventSettings(
        max_event_age=max_age, dead_letter_topic=topic, consumer=consumer, job=job or consumer
    )


def _name_setting(
    pick: Callable[[str, str, object], tuple[str, object]], option: str, variable: str, fix: str
) -> str:
    """A name setting (unset: ""), at most `MAX_CONSUMER_LENGTH` characters; ConfigError with `fix`."""
    name, raw = pick(option, variable, "")
    value = str(raw).strip()
    if len(value) > MAX_CONSUMER_LENGTH:
        raise ConfigError(f"{name} is {len(value)} characters, more than {MAX_CONSUMER_LENGTH}: {fix}")
    return value


def job_label(overrides: Mapping[str, object] | None = None, environ: Mapping[str, str] | None = None) -> str:
    """The `job` field of a delivery's lines when the settings could not be loaded: the job the
    settings would name, read without checking the other settings."""
    pick = picker(overrides, environ)
    job = str(pick("job", JOB_VARIABLE, "")[1]).strip()
    return job or str(pick("consumer", CONSUMER_VARIABLE, "")[1]).strip()
