"""The headers the stack adds to every delivery of a scheduled job, beside Scheduler's own: the
project and region that key its runs, and its overlap policy unless it is `allow` (what a
delivery without the header gets). One function, so the Scheduler jobs the stack deploys and a
local stand-in for Scheduler send the same."""

from __future__ import annotations

from runonce.contract import LOCATION_HEADER, OVERLAP_HEADER, PROJECT_HEADER, Overlap


def job_headers(project: str, region: str, overlap: Overlap | str = Overlap.ALLOW) -> dict[str, str]:
    """The headers of every delivery of a job of `project` and `region` with this overlap policy."""
    headers = {PROJECT_HEADER: project, LOCATION_HEADER: region}
    policy = Overlap(overlap)
    if policy is not Overlap.ALLOW:
        headers[OVERLAP_HEADER] = policy.value
    return headers
