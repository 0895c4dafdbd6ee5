"""The deployed sandbox team's scheduled job (the example team's `report`): Scheduler reaches the
internal-only function and each run executes once, a call from outside Google's network is
refused, and the TTL policy becomes active."""

from __future__ import annotations

import os
import time
import uuid
from collections import Counter
from datetime import UTC, datetime, timedelta

import pytest

from stacks import naming
from tests.sandbox import teams
from tests.sandbox.cloud import force_run
from tests.sandbox.stack import URI_OUTPUT

pytestmark = pytest.mark.sandbox

JOB = teams.REPORT
OUTBOX = "report_outbox"
TTL_ACTIVE_WITHIN = 20 * 60
# A fresh function's first request includes a cold start; Scheduler's own attempt deadline is 60 s.
EXECUTION_WITHIN = 5 * 60
# The runner's clock and Firestore's may differ: look a little further back than the test start.
CLOCK_MARGIN = timedelta(minutes=1)


def scheduler_headers(team, schedule_time: str) -> dict[str, str]:
    """The headers Cloud Scheduler sends for one run of the report job (plus runonce's own)."""
    return {
        "X-CloudScheduler": "true",
        "X-CloudScheduler-JobName": naming.scheduler_job_name(team.name, JOB),
        "X-CloudScheduler-ScheduleTime": schedule_time,
        "X-Runonce-Project": team.project,
        "X-Runonce-Location": team.region,
        "User-Agent": "Google-Cloud-Scheduler",
    }


def id_token(audience: str) -> str:
    """An ID token for the audience, from the sandbox service account credentials."""
    import google.auth.transport.requests
    from google.oauth2 import id_token as tokens

    return tokens.fetch_id_token(google.auth.transport.requests.Request(), audience)


def outbox(team, since: datetime) -> list[dict]:
    """Reports the report job published since `since` (one per execution)."""
    from google.cloud import firestore

    client = firestore.Client(project=team.project, database=team.database)
    entries = [doc.to_dict() for doc in client.collection(OUTBOX).stream()]
    job = naming.scheduler_job_name(team.name, JOB)
    return [
        entry
        for entry in entries
        if entry.get("job") == job and (entry.get("published_at") or since) >= since
    ]


def _same_instant(recorded, expected: datetime) -> bool:
    """Whether a recorded schedule time (datetime or RFC 3339 text) is this instant."""
    if isinstance(recorded, str):
        recorded = datetime.fromisoformat(recorded.replace("Z", "+00:00"))
    return recorded is not None and recorded == expected


def wait_for_outbox(team, since: datetime, at_least: int) -> list[dict]:
    """The outbox entries since `since`, once there are `at_least` of them (or the time is up)."""
    deadline = time.monotonic() + EXECUTION_WITHIN
    entries = outbox(team, since)
    while len(entries) < at_least and time.monotonic() < deadline:
        time.sleep(10)
        entries = outbox(team, since)
    return entries


def test_scheduler_reaches_the_internal_function_and_a_run_fired_twice_executes_once(
    deployed, sandbox_team, session
):
    started = datetime.now(UTC) - CLOCK_MARGIN
    force_run(session, sandbox_team.project, sandbox_team.region, sandbox_team.name, JOB)
    first = wait_for_outbox(sandbox_team, started, at_least=1)
    assert first, f"no execution within {EXECUTION_WITHIN} s of jobs.run: did Scheduler reach the function?"
    # "Force run" again before the next scheduled time: the same ScheduleTime, so the same run.
    force_run(session, sandbox_team.project, sandbox_team.region, sandbox_team.name, JOB)
    time.sleep(60)
    executions = Counter(entry["run_key"] for entry in outbox(sandbox_team, started))
    # A scheduled run may land in the window too; it has a key of its own. No key runs twice.
    assert executions and max(executions.values()) == 1, executions


def test_a_direct_call_from_outside_googles_network_is_refused_even_with_a_token(deployed, sandbox_team):
    import requests

    uri = deployed.outputs[URI_OUTPUT.format(JOB)]["value"]
    started = datetime.now(UTC) - CLOCK_MARGIN
    schedule_time = (started - timedelta(hours=1, seconds=uuid.uuid4().int % 3000)).replace(microsecond=0)
    headers = {
        **scheduler_headers(sandbox_team, schedule_time.isoformat().replace("+00:00", "Z")),
        "Authorization": f"Bearer {id_token(uri)}",
    }
    answer = requests.post(uri, headers=headers, data=b"{}", timeout=60)
    # Internal-only ingress refuses it whatever the token (Cloud Run "Restrict network ingress").
    assert not answer.ok, answer.status_code
    assert not any(
        _same_instant(entry.get("schedule_time"), schedule_time) for entry in outbox(sandbox_team, started)
    )


def test_ttl_policy_on_expire_at_is_active(deployed, sandbox_team):
    from google.cloud import firestore_admin_v1

    admin = firestore_admin_v1.FirestoreAdminClient()
    name = (
        f"projects/{sandbox_team.project}/databases/{sandbox_team.database}"
        f"/collectionGroups/{sandbox_team.collection}/fields/expire_at"
    )
    deadline = time.monotonic() + TTL_ACTIVE_WITHIN
    state = None
    while time.monotonic() < deadline:
        state = admin.get_field(name=name).ttl_config.state
        if state == firestore_admin_v1.Field.TtlConfig.State.ACTIVE:
            break
        time.sleep(30)
    assert state == firestore_admin_v1.Field.TtlConfig.State.ACTIVE, os.environ["RUNONCE_SANDBOX_PROJECT"]
