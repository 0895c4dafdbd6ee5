"""The deployed sandbox team's service jobs (docs/stacks/services.md): Scheduler reaches a path of
a Cloud Run service the stack deployed, and of one that existed before (the sandbox stack creates
it, the team only reads it), both internal-only, with an OIDC token for the run.app URL; and a run
forced twice is answered `completed` once and `duplicate` after, as the library logs it."""

from __future__ import annotations

from collections import defaultdict
from datetime import UTC, datetime, timedelta

import pytest

from tests.sandbox import teams
from tests.sandbox.cloud import force_run, log_entries, rfc3339
from tests.sandbox.variables import SERVICE_IMAGE_VARIABLE
from tests.sandbox.waiting import wait_for

# A fresh service's first request includes a cold start; log entries take a while to be listed.
ANSWERED_WITHIN = 5 * 60
CLOCK_MARGIN = timedelta(minutes=1)


def answers(session, team, service: str, since: datetime) -> list[dict]:
    """The library's answer lines (they carry `latency_ms`) of one Cloud Run service since `since`,
    read with the filter the stack's metrics use (`cloud_run_revision`, the short service name)."""
    return log_entries(
        session,
        team.project,
        f'resource.type="cloud_run_revision" AND resource.labels.service_name="{service}" '
        f'AND jsonPayload.logger="runonce" AND jsonPayload.latency_ms:* AND timestamp>="{rfc3339(since)}"',
    )


def forced_twice_is_answered_once(session, team, job: str, service: str) -> None:
    since = datetime.now(UTC) - CLOCK_MARGIN
    force_run(session, team.project, team.region, team.name, job)
    first = wait_for(lambda: answers(session, team, service, since), bool, within=ANSWERED_WITHIN)
    assert first, f"no answer from {service} within {ANSWERED_WITHIN} s of jobs.run: did Scheduler reach it?"
    # "Force run" again before the next scheduled time: the same ScheduleTime, so the same run.
    force_run(session, team.project, team.region, team.name, job)
    found = wait_for(
        lambda: answers(session, team, service, since), lambda lines: len(lines) >= 2, within=ANSWERED_WITHIN
    )
    outcomes: dict[str, list[str]] = defaultdict(list)
    for entry in found:
        outcomes[entry["jsonPayload"]["run_key"]].append(entry["jsonPayload"]["outcome"])
    # A scheduled run may land in the window too; it has a key of its own. No key completes twice.
    assert outcomes and all(answered.count("completed") <= 1 for answered in outcomes.values()), outcomes
    assert any(sorted(answered) == ["completed", "duplicate"] for answered in outcomes.values()), outcomes


@pytest.mark.sandbox(needs=(SERVICE_IMAGE_VARIABLE,))
def test_a_service_job_on_the_deployed_service_forced_twice_runs_once(deployed, sandbox_team, session):
    forced_twice_is_answered_once(session, sandbox_team, teams.DEPLOYED_SERVICE_JOB, teams.DEPLOYED_SERVICE)


@pytest.mark.sandbox(needs=(SERVICE_IMAGE_VARIABLE,))
def test_a_service_job_on_an_existing_service_forced_twice_runs_once(deployed, sandbox_team, session):
    forced_twice_is_answered_once(session, sandbox_team, teams.EXISTING_SERVICE_JOB, teams.EXISTING_SERVICE)
