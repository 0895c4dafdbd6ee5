"""An exact UTC instant read from RFC 3339 text, as a ScheduleTime or an event's time carries it.

Parsed with a mandatory offset and kept to the nanosecond, so the same instant written with
another offset is the same instant, and its canonical form (`Instant.rfc3339`) is one string.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta, timezone
from typing import NamedTuple

# [0-9], not \d: \d also matches other scripts' digits, which int() would then read.
_RFC3339 = re.compile(
    r"(?P<date>[0-9]{4}-[0-9]{2}-[0-9]{2})[Tt](?P<time>[0-9]{2}:[0-9]{2}:[0-9]{2})"
    r"(?:\.(?P<fraction>[0-9]{1,9}))?(?:(?P<zulu>[Zz])|(?P<sign>[+-])(?P<oh>[0-9]{2}):(?P<om>[0-9]{2}))"
)


class Instant(NamedTuple):
    """An exact UTC instant with nanosecond precision, as ScheduleTime can carry."""

    utc: datetime
    nanos: int

    def rfc3339(self) -> str:
        """The canonical form: UTC, `Z`, nine fraction digits only when the fraction is not zero."""
        base = self.utc.strftime("%Y-%m-%dT%H:%M:%S")
        return f"{base}.{self.nanos:09d}Z" if self.nanos else f"{base}Z"


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
