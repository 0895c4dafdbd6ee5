"""The headers the stack adds to every delivery of a scheduled job, beside Scheduler's own: the
project and region that key its runs, its overlap policy unless it is `allow` (what a
delivery without the header gets), and its calendar when it has one. One function, so the
Scheduler jobs the stack deploys and a local stand-in for Scheduler send the same."""

from __future__ import annotations

from runonce.contract import CALENDAR_HEADER, LOCATION_HEADER, OVERLAP_HEADER, PROJECT_HEADER, Overlap
from runonce.scheduler.exclusion import JobCalendar


def job_headers(
    project: str, region: str, overlap: Overlap | str = Overlap.ALLOW, calendar: JobCalendar | None = None
) -> dict[str, str]:
    """The headers of every delivery of a job of `project` and `region` with this overlap policy
    and calendar (`Job.calendar`: X-Runonce-Calendar, read by `runonce.scheduler.exclusion`)."""
    headers = {PROJECT_HEADER: project, LOCATION_HEADER: region}
    policy = Overlap(overlap)
    if policy is not Overlap.ALLOW:
        headers[OVERLAP_HEADER] = policy.value
    if calendar is not None:
        headers[CALENDAR_HEADER] = calendar.header_value()
    return headers
