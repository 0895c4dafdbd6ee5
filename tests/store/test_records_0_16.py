"""Records the previous release wrote are read by this one: a run that 0.16.0 recorded is
answered as that release would have answered it, on the Firestore emulator and the in-memory store.

The records below are exactly what 0.16.0 (commit df25f79, the merge that made the distribution
0.16.0) writes for one scheduled run, field by field, read from its code with
`git show df25f79:functions/runonce/<path>`:
- `scheduler/adapter.py`, `_occurrence`: the claim's fields job, schedule_time, forced, project,
  location; `scheduler/keys.py`, `run_key`: the document id (RUN_KEY, computed by that code for
  these headers);
- `store/_records.py`: `lease_fields` (status in_progress, runonce_version, attempt_id,
  lease_expires, expire_at, claimed_at), `finish_fields` (status, runonce_version, finished_at,
  expire_at over the result or error fields), `hold_fields` (lease_expires, held_at, held_reason);
- `store/firestore.py`, `Ledger._claim` (attempts 1) and `Ledger._take_over` (attempts + 1,
  previous_attempt_id); `core/store.py`, `StoredResult.fields` (result_json, result_stored);
- `core/settings.py`: its default lease, 900 s, and retention, 7 days.
"""

from __future__ import annotations

import uuid
from datetime import timedelta
from typing import Any

import flask
import pytest

import runonce
from runonce import PermanentError
from runonce.core.settings import load_settings
from runonce.core.store import Store
from runonce.scheduler import adapter
from runonce.store.connection import Setup
from runonce.store.memory import MemoryStore
from tests.conftest import PROJECT, SCHEDULED, ManualClock

LEASE = timedelta(seconds=120)
"""This release's lease in the app under test."""
RETENTION = timedelta(days=7)

RUN_KEY = "213fbb98a88042a7151011497106357ee7a1d6c3ea2a856245572cacd83ab5cb"
HEADERS = {
    "User-Agent": "Google-Cloud-Scheduler",
    "X-CloudScheduler": "true",
    "X-CloudScheduler-JobName": "nightly-report",
    "X-CloudScheduler-ScheduleTime": "2026-11-29T03:00:00Z",
    "X-Runonce-Project": "acme-prod",
    "X-Runonce-Location": "europe-west1",
}
"""The delivery whose run 0.16.0 keyed RUN_KEY."""

OLD_LEASE = timedelta(seconds=900)
CLAIMED_AT = SCHEDULED + timedelta(seconds=2)
"""When the 0.16.0 attempt claimed the run: before the `clock` fixture's start (SCHEDULED + 5 s)."""
FIRST, SECOND = "6f1c0d9e4b2a4c55a0e3d1f2b7c8a901", "0b9e8d7c6f5a4e3d2c1b0a9f8e7d6c5b"
"""Two 0.16.0 attempt ids (uuid4().hex)."""

RUN_FIELDS: dict[str, Any] = {
    "job": "nightly-report",
    "schedule_time": "2026-11-29T03:00:00Z",
    "forced": False,
    "project": "acme-prod",
    "location": "europe-west1",
}
CLAIMED: dict[str, Any] = {
    **RUN_FIELDS,
    "status": "in_progress",
    "runonce_version": "0.16.0",
    "attempt_id": FIRST,
    "lease_expires": CLAIMED_AT + OLD_LEASE,
    "expire_at": CLAIMED_AT + RETENTION,
    "claimed_at": CLAIMED_AT,
    "attempts": 1,
}
"""0.16.0's first claim, its attempt still running or dead."""
FINISHED_AT = CLAIMED_AT + timedelta(seconds=3)
COMPLETED: dict[str, Any] = {
    **CLAIMED,
    "result_json": '{"rows":42}',
    "result_stored": True,
    "status": "completed",
    "finished_at": FINISHED_AT,
    "expire_at": FINISHED_AT + RETENTION,
}
"""0.16.0's first attempt completed, its job having returned {"rows": 42}."""
HELD_AT = CLAIMED_AT + timedelta(seconds=1)
TAKEN_AT = HELD_AT + timedelta(seconds=60)
FAILED_AT = TAKEN_AT + timedelta(seconds=2)
FAILED: dict[str, Any] = {
    **CLAIMED,
    "held_at": HELD_AT,
    "held_reason": "OutcomeUnknown: the bank's answer was lost",
    "attempt_id": SECOND,
    "attempts": 2,
    "previous_attempt_id": FIRST,
    "claimed_at": TAKEN_AT,
    "lease_expires": TAKEN_AT + OLD_LEASE,
    "error": "PermanentError: the report's source table is gone",
    "status": "failed",
    "finished_at": FAILED_AT,
    "expire_at": FAILED_AT + RETENTION,
}
"""0.16.0's first attempt held the run 60 s (OutcomeUnknown), the second took it over once that
hold ran out and failed permanently: every field a 0.16.0 run record can have."""


@pytest.fixture(params=["firestore", pytest.param("memory", marks=pytest.mark.fast)])
def store(request, clock: ManualClock) -> Store:
    """An empty store of this release, on the emulator or in memory."""
    if request.param == "memory":
        return MemoryStore(LEASE, RETENTION, clock)
    from google.cloud import firestore

    from runonce.store.firestore import Ledger, LedgerStore

    request.getfixturevalue("firestore_emulator")
    client = firestore.Client(project=PROJECT)
    return LedgerStore(Ledger(client, f"records_0_16_{uuid.uuid4().hex[:12]}", LEASE, RETENTION))


class Served:
    """A job under this release's @deduplicated, served by Flask on `store`; `runs` lists the
    `current_run()` of every execution of its body."""

    def __init__(self, store: Store, monkeypatch: pytest.MonkeyPatch):
        self.runs: list[runonce.Run] = []
        self.raises: Exception | None = None
        monkeypatch.setattr(adapter, "Connection", lambda overrides, client: _Connection(store, overrides))
        handler = runonce.deduplicated(lease=int(LEASE.total_seconds()))(self._job)
        app = flask.Flask(f"records-0-16-{uuid.uuid4().hex[:6]}")

        def view() -> Any:  # the job gets the request itself, not Flask's proxy of it
            return handler(flask.request._get_current_object())

        app.add_url_rule("/", "handle", view, methods=["POST"])
        self.client = app.test_client()

    def _job(self, request: flask.Request) -> dict[str, int]:
        self.runs.append(runonce.current_run())
        if self.raises is not None:
            raise self.raises
        return {"rows": 7}

    def deliver(self) -> tuple[int, dict[str, Any]]:
        """Deliver the run once: the status and the JSON answered."""
        response = self.client.post("/", headers=HEADERS)
        return response.status_code, response.json


class _Connection:
    def __init__(self, store: Store, overrides: dict[str, Any]):
        self._store, self._overrides = store, overrides

    def get(self) -> Setup:
        return Setup(load_settings(self._overrides), self._store, PROJECT)


@pytest.fixture
def served(store: Store, monkeypatch: pytest.MonkeyPatch) -> Served:
    return Served(store, monkeypatch)


def _recorded_by_0_16(store: Store, record: dict[str, Any]) -> None:
    """Put 0.16.0's `record` under its run key, as that release left it."""
    assert store.read(RUN_KEY) is None
    assert store.amend(RUN_KEY, lambda found: dict(record)) == record
    assert store.read(RUN_KEY) == record


@pytest.mark.fast
def test_the_fixture_is_every_field_a_0_16_run_record_has():
    assert set(FAILED) - set(COMPLETED) == {"held_at", "held_reason", "previous_attempt_id", "error"}
    assert set(COMPLETED) - set(FAILED) == {"result_json", "result_stored"}
    assert {record["runonce_version"] for record in (CLAIMED, COMPLETED, FAILED)} == {"0.16.0"}


def test_this_release_keys_the_delivery_as_0_16_did(store, served, clock):
    served.raises = PermanentError("any")
    status, answer = served.deliver()
    assert (status, answer["run_key"]) == (200, RUN_KEY)


def test_a_run_0_16_completed_is_answered_duplicate_with_its_result_and_not_run(store, served, clock):
    _recorded_by_0_16(store, COMPLETED)
    status, answer = served.deliver()
    assert (status, answer["outcome"], answer["status"]) == (200, "duplicate", "completed")
    assert (answer["run_key"], answer["result"]) == (RUN_KEY, {"rows": 42})
    assert served.runs == []
    assert store.read(RUN_KEY) == COMPLETED


def test_a_run_0_16_failed_permanently_is_answered_duplicate_failed_and_not_retried(store, served, clock):
    _recorded_by_0_16(store, FAILED)
    for _ in range(2):  # Scheduler's delivery and a retry of it
        status, answer = served.deliver()
        assert (status, answer["outcome"], answer["status"]) == (200, "duplicate", "failed")
        assert answer["error"] == FAILED["error"]
    assert served.runs == []
    assert store.read(RUN_KEY) == FAILED


def test_a_run_0_16_holds_under_a_live_lease_is_answered_in_progress_and_not_run(store, served, clock):
    _recorded_by_0_16(store, CLAIMED)
    status, answer = served.deliver()
    assert (status, answer["outcome"]) == (409, "in_progress")
    assert served.runs == []
    assert store.read(RUN_KEY) == CLAIMED


def test_a_run_0_16_left_in_progress_is_taken_over_once_its_lease_ended_and_completed(store, served, clock):
    _recorded_by_0_16(store, CLAIMED)
    clock.advance((CLAIMED["lease_expires"] - clock()).total_seconds() + 1)
    status, answer = served.deliver()
    assert (status, answer["outcome"], answer["attempt"]) == (200, "completed", 2)
    assert [run.attempt for run in served.runs] == [2]
    record = store.read(RUN_KEY)
    assert {name: record[name] for name in RUN_FIELDS} == RUN_FIELDS
    assert (record["status"], record["attempts"], record["previous_attempt_id"]) == ("completed", 2, FIRST)
    assert record["runonce_version"] == runonce.__version__ != "0.16.0"
    assert record["result_json"] == '{"rows":7}'
    status, answer = served.deliver()
    assert (answer["outcome"], answer["result"], len(served.runs)) == ("duplicate", {"rows": 7}, 1)
