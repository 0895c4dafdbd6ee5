"""One HTTP attempt, sent the way Cloud Scheduler sends it to an HTTP target.

POST with Scheduler's headers, the X-Runonce-* headers the stack adds, and the job's body; the
attempt deadline is the client timeout. What comes back is an `Answer`: a status and the
handler's JSON, or the transport error that stands in for one (deadline, connection lost).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime

import requests

from runonce import contract
from stacks.config.headers import job_headers
from stacks.naming import scheduler_job_name
from stacks.team import Job, Team

USER_AGENT = "Google-Cloud-Scheduler"


def rfc3339(moment: datetime) -> str:
    """The ScheduleTime header value for an instant: UTC with a Z, like Scheduler writes it."""
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def scheduler_headers(team: Team, job: Job, schedule_time: datetime) -> dict[str, str]:
    """The headers of every delivery of one run; JobName is the deployed Scheduler job's name, and
    X-Runonce-Overlap the job's overlap policy when it is not `allow`, X-Runonce-Calendar its
    calendar when it has one (as the stack sends them)."""
    return {
        "User-Agent": USER_AGENT,
        "X-CloudScheduler": "true",
        contract.JOB_HEADER: scheduler_job_name(team.name, job.name),
        contract.TIME_HEADER: rfc3339(schedule_time),
        **job_headers(team.project, team.region, job.overlap, job.calendar),
        "Content-Type": "application/octet-stream",
    }


@dataclass(frozen=True)
class Answer:
    """What one attempt got back; `status` is None when no HTTP answer arrived."""

    status: int | None
    body: dict = field(default_factory=dict)
    error: str | None = None
    """"deadline" (attempt deadline passed), "connection" (lost, e.g. the instance died), or None."""

    @property
    def outcome(self) -> str:
        """The handler's outcome field, or the transport error."""
        return self.body.get("outcome") or self.error or f"http_{self.status}"

    @property
    def ok(self) -> bool:
        """A 2xx: Cloud Scheduler counts the attempt as a success and stops retrying."""
        return self.status is not None and 200 <= self.status < 300


def post(url: str, headers: dict[str, str], body: bytes, deadline_seconds: float) -> Answer:
    """Send one attempt and wait at most `deadline_seconds` (wall) for its answer."""
    try:
        with requests.Session() as session:
            session.trust_env = False  # never route loopback traffic through a configured proxy
            response = session.post(url, data=body, headers=headers, timeout=max(deadline_seconds, 0.001))
    except requests.Timeout:
        return Answer(None, error="deadline")
    except requests.ConnectionError:
        return Answer(None, error="connection")
    try:
        payload = response.json()
    except ValueError:
        payload = {}
    return Answer(response.status_code, payload if isinstance(payload, dict) else {})


def both_at_once(send: Callable[[], Answer]) -> list[Answer]:
    """Two copies of one attempt sent at the same moment (a duplicate delivery); both answers."""
    copies: list[Answer] = []
    pair = [threading.Thread(target=lambda: copies.append(send())) for _ in range(2)]
    for thread in pair:
        thread.start()
    for thread in pair:
        thread.join()
    return copies


def retry_until_ok(
    answers: list[Answer], send: Callable[[], Answer], lost: bool, pause: float, max_attempts: int
) -> None:
    """Scheduler's retries: send again every `pause` seconds until an answer in `answers` is a 2xx
    (at least once more if the 2xx was `lost`), at most `max_attempts` answers in all."""
    must_retry = lost
    while (must_retry or not any(answer.ok for answer in answers)) and len(answers) < max_attempts:
        must_retry = False
        time.sleep(pause)
        answers.append(send())
