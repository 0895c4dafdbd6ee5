"""A job's calendar, what Cron cannot say: an active window of dates and excluded dates, in the
job's time zone.

The stack writes it into the X-Runonce-Calendar header of every delivery (`header_value`); the
handler reads it back (`job_calendar`) and records a scheduled run it excludes without running it;
the watchdog, backfill and catch-up use `excluded` on their expected ticks. Standard library only,
so the stacks and the local scheduler import it without the Google clients.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, date, datetime
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from ..contract import CALENDAR_HEADER, Excluded
from ..core.errors import ConfigError


@dataclass(frozen=True)
class JobCalendar:
    """When a job's scheduled runs run: dates from `start` to `end` (both included, either open),
    none of `excluded`, each run's date read in `time_zone`, none scheduled after `last_run`."""

    time_zone: str
    start: date | None = None
    end: date | None = None
    excluded: frozenset[date] = frozenset()
    last_run: datetime | None = None
    """The last scheduled run that runs (aware, UTC), for a window that ends after a number of
    runs (the stack computes it from the schedule); None: the window ends with `end`."""

    def excluded_because(self, moment: datetime) -> Excluded | None:
        """Why the run scheduled at `moment` (aware) is excluded, or None if it runs."""
        day = moment.astimezone(ZoneInfo(self.time_zone)).date()
        if self.start is not None and day < self.start:
            return Excluded.BEFORE_WINDOW
        if (self.end is not None and day > self.end) or (
            self.last_run is not None and moment > self.last_run
        ):
            return Excluded.AFTER_WINDOW
        if day in self.excluded:
            return Excluded.EXCLUDED_DATE
        return None

    def header_value(self) -> str:
        """The X-Runonce-Calendar header's value: compact JSON, dates as YYYY-MM-DD, sorted."""
        value: dict[str, object] = {"time_zone": self.time_zone}
        if self.start is not None:
            value["start"] = self.start.isoformat()
        if self.end is not None:
            value["end"] = self.end.isoformat()
        if self.excluded:
            value["exclude"] = sorted(day.isoformat() for day in self.excluded)
        if self.last_run is not None:
            value["last_run"] = self.last_run.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        return json.dumps(value, separators=(",", ":"))


def parse_calendar(raw: str) -> JobCalendar:
    """The calendar a header value states; ConfigError naming the header and what is wrong."""

    def bad(why: str) -> ConfigError:
        return ConfigError(
            f"the {CALENDAR_HEADER} header {why}: it must be the JSON object the stack writes "
            '({"time_zone": ZONE, "start"/"end": "YYYY-MM-DD", "exclude": [dates], '
            '"last_run": "YYYY-MM-DDTHH:MM:SSZ"}); '
            "redeploy the job's stack"
        )

    try:
        value = json.loads(raw)
    except ValueError:
        raise bad("is not JSON") from None
    if not isinstance(value, dict) or set(value) - {"time_zone", "start", "end", "exclude", "last_run"}:
        raise bad("is not an object of time_zone, start, end, exclude and last_run")
    zone = value.get("time_zone")
    if not isinstance(zone, str):
        raise bad("has no time_zone")
    try:
        ZoneInfo(zone)
    except (ZoneInfoNotFoundError, ValueError):
        raise bad(f"names an unknown time zone {zone!r}") from None

    def day(text: object, name: str) -> date:
        try:
            if not isinstance(text, str):
                raise ValueError(text)
            return date.fromisoformat(text)
        except ValueError:
            raise bad(f"has a {name} that is no YYYY-MM-DD date: {text!r}") from None

    def instant(text: object) -> datetime:
        try:
            if not isinstance(text, str):
                raise ValueError(text)
            moment = datetime.fromisoformat(text)
            if moment.tzinfo is None:
                raise ValueError(text)
            return moment.astimezone(UTC)
        except ValueError:
            raise bad(f"has a last_run that is no RFC 3339 UTC time: {text!r}") from None

    dates = value.get("exclude", [])
    if not isinstance(dates, list):
        raise bad("has an exclude that is not a list")
    return JobCalendar(
        time_zone=zone,
        start=None if value.get("start") is None else day(value["start"], "start"),
        end=None if value.get("end") is None else day(value["end"], "end"),
        excluded=frozenset(day(text, "excluded date") for text in dates),
        last_run=None if value.get("last_run") is None else instant(value["last_run"]),
    )


def job_calendar(headers: Mapping[str, str]) -> JobCalendar | None:
    """The calendar of the delivery's job (its X-Runonce-Calendar header), or None without one."""
    raw = next((value for name, value in headers.items() if name.lower() == CALENDAR_HEADER.lower()), None)
    return None if raw is None or not raw.strip() else parse_calendar(raw)


def included(calendar: JobCalendar | None, moments: Iterable[datetime]) -> list[datetime]:
    """The `moments` the calendar does not exclude (all of them without a calendar)."""
    return [moment for moment in moments if calendar is None or calendar.excluded_because(moment) is None]
