"""The deployed example team: one execution per run, IAM enforced, TTL policy active."""

from __future__ import annotations

import os
import time
import uuid
from datetime import UTC, datetime, timedelta

import pytest
from pytest_terraform import terraform

pytestmark = [pytest.mark.sandbox, pytest.mark.usefixtures("sandbox_stack")]

JOB = "report"
OUTBOX = "report_outbox"
TTL_ACTIVE_WITHIN = 20 * 60


# pytest-terraform: a session fixture `example` that applies build/sandbox/stacks/example (written
# by the sandbox_stack fixture) once and destroys it after the last test.
terraform("example", scope="session")


def scheduler_headers(team, schedule_time: str) -> dict[str, str]:
    """The headers Cloud Scheduler sends for one run of the report job (plus runonce's own)."""
    return {
        "X-CloudScheduler": "true",
        "X-CloudScheduler-JobName": f"{team.name}-{JOB}",
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


def outbox_entries(team, schedule_time: datetime) -> int:
    """Reports the job published for this schedule time."""
    from google.cloud import firestore

    client = firestore.Client(project=team.project, database=team.database)
    return sum(
        1
        for doc in client.collection(OUTBOX).stream()
        if _same_instant(doc.get("schedule_time"), schedule_time)
    )


def _same_instant(recorded, expected: datetime) -> bool:
    """Whether a recorded schedule time (datetime or RFC 3339 text) is this instant."""
    if isinstance(recorded, str):
        recorded = datetime.fromisoformat(recorded.replace("Z", "+00:00"))
    return recorded is not None and recorded == expected


@pytest.fixture
def schedule_time() -> datetime:
    """A schedule time no real Scheduler run of the sandbox can have (a random past second)."""
    return datetime.now(UTC).replace(microsecond=0) - timedelta(hours=1, seconds=uuid.uuid4().int % 3000)


def test_same_run_delivered_twice_executes_once(example, sandbox_team, schedule_time):
    import requests

    url = example.outputs[f"{JOB}-url"]["value"]
    headers = {
        **scheduler_headers(sandbox_team, schedule_time.isoformat().replace("+00:00", "Z")),
        "Authorization": f"Bearer {id_token(url)}",
    }
    first = requests.post(url, headers=headers, data=b"{}", timeout=120)
    second = requests.post(url, headers=headers, data=b"{}", timeout=120)
    assert first.status_code == 200, first.text
    assert second.status_code == 200, second.text
    assert outbox_entries(sandbox_team, schedule_time) == 1


def test_call_without_token_is_refused(example, sandbox_team, schedule_time):
    import requests

    url = example.outputs[f"{JOB}-url"]["value"]
    headers = scheduler_headers(sandbox_team, schedule_time.isoformat().replace("+00:00", "Z"))
    answer = requests.post(url, headers=headers, data=b"{}", timeout=60)
    assert answer.status_code == 403
    assert outbox_entries(sandbox_team, schedule_time) == 0


def test_ttl_policy_on_expire_at_is_active(example, sandbox_team):
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
