"""What a deployed job did, read back from the sandbox project: its ledger record, the outbox
entries its body wrote, and how many times its body started (from the lines the runonce core
logs around every body, `runonce.contract.BODY_FIELD`).

A body that started twice for one run key is the defect the kit exists to prevent; an entry
in the outbox alone cannot show it, since the outbox documents are named by the run key.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from datetime import datetime
from functools import cache
from typing import Any

import requests

from runonce.contract import BODY_END_FIELD, BODY_FIELD, BodyEnd, BodyStage
from stacks.team import Team
from tests.sandbox.cloud import log_entries, rfc3339
from tests.sandbox.teams import CLOUD_EVENT_OUTBOX
from tests.sandbox.waiting import wait_for

LOGS_WITHIN = 5 * 60
"""Cloud Logging shows a line within about a minute; this leaves room."""
LOG_SETTLE = 60
"""After the first line shows, how long a second one (a duplicate body) gets to show too."""
# The run key is bound on every line of a run as this field (runonce.events.adapter, runonce.core.handler).
RUN_KEY_FIELD = "run_key"


def firestore_client(team: Team):
    """A Firestore client on the team's ledger database (the jobs' outboxes live there too)."""
    return _client(team.project, team.database)


@cache
def _client(project: str, database: str):
    from google.cloud import firestore

    return firestore.Client(project=project, database=database)


def ledger_record(team: Team, key: str) -> dict[str, Any] | None:
    """The run's ledger record, or None."""
    snapshot = firestore_client(team).collection(team.collection).document(key).get()
    return snapshot.to_dict() if snapshot.exists else None


def outbox_entry(team: Team, outbox: str, key: str) -> dict[str, Any] | None:
    """The outbox document a body wrote for this run key, or None."""
    snapshot = firestore_client(team).collection(outbox).document(key).get()
    return snapshot.to_dict() if snapshot.exists else None


def outbox_entries(
    team: Team, outbox: str, matches: Callable[[dict[str, Any]], bool]
) -> list[dict[str, Any]]:
    """Every document of the outbox that `matches`."""
    entries = (snapshot.to_dict() for snapshot in firestore_client(team).collection(outbox).stream())
    return [entry for entry in entries if matches(entry)]


def body_lines(
    session: requests.Session,
    team: Team,
    key: str,
    since: datetime,
    stage: BodyStage = BodyStage.STARTED,
    end: BodyEnd | None = None,
) -> int:
    """How many body lines of this run key (its starts, or its ends of one kind) were logged since
    `since`, once they have had time to arrive: waits for the first, then `LOG_SETTLE` seconds
    for any other."""
    filter = (
        f'jsonPayload.{RUN_KEY_FIELD}="{key}" AND jsonPayload.{BODY_FIELD}="{stage.value}" '
        f'AND timestamp>="{rfc3339(since)}"'
    )
    if end is not None:
        filter += f' AND jsonPayload.{BODY_END_FIELD}="{end.value}"'

    def count() -> int:
        return len(log_entries(session, team.project, filter))

    if wait_for(count, lambda seen: seen >= 1, within=LOGS_WITHIN, every=15) == 0:
        return 0
    time.sleep(LOG_SETTLE)
    return count()


def uploaded_object_entries(team: Team, name: str) -> list[dict[str, Any]]:
    """The CloudEvent function's outbox entries about the object `name` (its event data is the
    object's metadata)."""
    return outbox_entries(
        team, CLOUD_EVENT_OUTBOX, lambda entry: json.loads(entry.get("data") or "{}").get("name") == name
    )


def message_entries(team: Team, data: str) -> list[dict[str, Any]]:
    """The CloudEvent function's outbox entries about a message whose data is `data`."""
    return outbox_entries(team, CLOUD_EVENT_OUTBOX, lambda entry: entry.get("data") == data)
