"""What one Cloud Scheduler delivery says: the job, the scheduled instant, where it came from.

Headers are read case-insensitively (HTTP/2 sends them lower case). ScheduleTime is parsed as
RFC 3339 and kept as an exact UTC instant, so the same instant written with another offset is
the same run. Nothing here touches the store: a bad delivery is rejected before any write.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta, timezone
from functools import cached_property

from .contract import JOB_HEADER, LOCATION_HEADER, PROJECT_HEADER, TIME_HEADER
from .fields import BadField, read_text

# Scheduler job ids are at most 500 characters; the others are far shorter in practice.
MAX_LENGTH = {JOB_HEADER: 500, TIME_HEADER: 64, PROJECT_HEADER: 100, LOCATION_HEADER: 100}

# [0-9], not \d: \d also matches other scripts' digits, which int() would then read.
_RFC3339 = re.compile(
    r"(?P<date>[0-9]{4}-[0-9]{2}-[0-9]{2})[Tt](?P<time>[0-9]{2}:[0-9]{2}:[0-9]{2})"
    r"(?:\.(?P<fraction>[0-9]{1,9}))?(?:(?P<zulu>[Zz])|(?P<sign>[+-])(?P<oh>[0-9]{2}):(?P<om>[0-9]{2}))"
)


class BadDelivery(BadField):
    """The request cannot be a Cloud Scheduler delivery; answered 400, nothing is written."""

    MISSING = "missing; is this request from Cloud Scheduler with a unix-cron schedule?"

    @property
    def header(self) -> str:
        """The header at fault (its field)."""
        return self.field


@dataclass(frozen=True)
class Instant:
    """An exact UTC instant with nanosecond precision, as ScheduleTime can carry."""

    utc: datetime
    nanos: int

    def rfc3339(self) -> str:
        """The canonical form: UTC, `Z`, nine fraction digits only when the fraction is not zero."""
        return self._canonical

    @cached_property
    def _canonical(self) -> str:  # the key, the record and every log line use it: format it once
        base = self.utc.strftime("%Y-%m-%dT%H:%M:%S")
        return f"{base}.{self.nanos:09d}Z" if self.nanos else f"{base}Z"


@dataclass(frozen=True)
class Delivery:
    """The identity of one scheduled run as the request states it."""

    job: str
    schedule_time: Instant
    project: str
    location: str
    forced: bool
    """ScheduleTime lies more than the skew ahead of the clock: a "Force run", which carries the
    next scheduled time (unless that scheduled run already has a record: the handler checks)."""


def parse_instant(text: str) -> Instant:
    """Parse an RFC 3339 timestamp with a mandatory offset; ValueError says what is wrong."""
    match = _RFC3339.fullmatch(text)
    if match is None:
        raise ValueError(f"{text!r} is not an RFC 3339 timestamp like 2026-01-31T03:00:00Z")
    year, month, day = (int(part) for part in match["date"].split("-"))
    hour, minute, second = (int(part) for part in match["time"].split(":"))
    if match["zulu"]:
        offset = timedelta(0)
    else:
        hours, minutes = int(match["oh"]), int(match["om"])
        if hours > 23 or minutes > 59:
            raise ValueError(f"{text!r} has an impossible UTC offset")
        offset = timedelta(hours=hours, minutes=minutes) * (1 if match["sign"] == "+" else -1)
    try:
        local = datetime(year, month, day, hour, minute, second, tzinfo=timezone(offset))
    except ValueError as exc:
        raise ValueError(f"{text!r} is not a real date and time ({exc})") from None
    try:
        utc = local.astimezone(UTC)
    except OverflowError:
        raise ValueError(f"{text!r} is outside the years 1-9999 once converted to UTC") from None
    nanos = int((match["fraction"] or "").ljust(9, "0") or 0)
    return Instant(utc=utc, nanos=nanos)


def parse_delivery(headers: Mapping[str, str], now: datetime, forced_skew: timedelta) -> Delivery:
    """Read the Scheduler headers of one request; BadDelivery names the header and the fix."""
    lowered = {name.lower(): value for name, value in headers.items()}

    def header(name: str, required: bool) -> str:
        value = lowered.get(name.lower())
        # A header of only blanks is as good as missing.
        stripped = value.strip() if value is not None else None
        return read_text(stripped, name, MAX_LENGTH[name], BadDelivery, required)

    job = header(JOB_HEADER, required=True)
    raw_time = header(TIME_HEADER, required=True)
    try:
        instant = parse_instant(raw_time)
    except ValueError as exc:
        raise BadDelivery(TIME_HEADER, str(exc)) from None
    return Delivery(
        job=job,
        schedule_time=instant,
        project=header(PROJECT_HEADER, required=False),
        location=header(LOCATION_HEADER, required=False),
        forced=instant.utc > now + forced_skew,
    )
