"""What one Cloud Scheduler delivery says: the job, the scheduled instant, where it came from.

Headers are read case-insensitively (HTTP/2 sends them lower case). ScheduleTime is parsed as
RFC 3339 and kept as an exact UTC instant, so the same instant written with another offset is
the same run. Nothing here touches the store: a bad delivery is rejected before any write.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime, timedelta
from typing import NamedTuple

from .._instant import Instant, parse_instant
from ..contract import JOB_HEADER, LOCATION_HEADER, OVERLAP_HEADER, PROJECT_HEADER, TIME_HEADER, Overlap
from ..core.errors import ConfigError
from ..core.fields import BadField, read_text
from ..core.settings import overlap_setting

# Scheduler job ids are at most 500 characters; the others are far shorter in practice.
MAX_LENGTH = {JOB_HEADER: 500, TIME_HEADER: 64, PROJECT_HEADER: 100, LOCATION_HEADER: 100}


class BadDelivery(BadField):
    """The request cannot be a Cloud Scheduler delivery; answered 400, nothing is written."""

    MISSING = "missing; is this request from Cloud Scheduler with a unix-cron schedule?"

    @property
    def header(self) -> str:
        """The header at fault (its field)."""
        return self.field


class Delivery(NamedTuple):
    """The identity of one scheduled run as the request states it."""

    job: str
    schedule_time: Instant
    project: str
    location: str
    forced: bool
    """ScheduleTime lies more than the skew ahead of the clock: a "Force run", which carries the
    next scheduled time (unless that scheduled run already has a record: the handler checks)."""
    overlap: Overlap = Overlap.ALLOW
    """The job's overlap policy (`job_overlap`); not part of the run's identity (its key)."""


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


def job_overlap(headers: Mapping[str, str], option: Overlap | None) -> Overlap:
    """The job's overlap policy: the X-Runonce-Overlap header's (the stack sends the team file's
    `Job.overlap`), else the decorator option's, else allow. ConfigError when the header names no
    policy or says another than the option: a setup to fix, answered `misconfigured` (500), so
    Scheduler retries the run and nothing is lost."""
    raw = next((value for name, value in headers.items() if name.lower() == OVERLAP_HEADER.lower()), None)
    given = None if raw is None or not raw.strip() else overlap_setting(f"{OVERLAP_HEADER} header", raw)
    if given is not None and option is not None and given is not option:
        raise ConfigError(
            f"the job's overlap policy is {given.value} by the {OVERLAP_HEADER} header (the team "
            f"file's Job.overlap) but {option.value} by the decorator option overlap=: give it in one "
            "place, or make both say the same"
        )
    return given or option or Overlap.ALLOW
