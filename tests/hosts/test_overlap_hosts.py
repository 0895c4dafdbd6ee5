"""The overlap policy on every host (tests/hosts/conftest.py: functions-framework, a Flask view, a
Django view, Starlette and FastAPI with `def` and `async def` jobs), set by the decorator option or
by the X-Runonce-Overlap header: every host reaches it through the shared core (docs/schedules/overlap.md)."""

from __future__ import annotations

import pytest

from runonce.contract import OVERLAP_HEADER
from runonce.core.errors import OutcomeUnknown
from tests.core.conftest import scheduler_headers

pytestmark = pytest.mark.both_stores

FIRST, SECOND = "2026-11-29T02:55:00Z", "2026-11-29T03:00:00Z"


def _held():
    raise OutcomeUnknown("the export's answer was lost", 600)


def test_a_skip_jobs_run_meeting_a_held_run_is_skipped_on_every_host(serve, probe, records):
    client = serve(overlap="skip")
    probe.behaviour = _held  # the first run stays in progress: it holds the job
    status, body = client.post(scheduler_headers(time=FIRST))
    assert (status, body["outcome"]) == (409, "in_progress")
    holder = body["run_key"]
    probe.behaviour = lambda: "second"
    status, body = client.post(scheduler_headers(time=SECOND))
    assert (status, body["outcome"], body["skipped_for"]) == (200, "skipped", holder)
    assert probe.count == 1
    runs = [record for record in records() if "status" in record]
    assert sorted(record["status"] for record in runs) == ["in_progress", "skipped"]
    assert [record["lock_holder"] for record in records() if "status" not in record] == [holder]


def test_a_wait_jobs_run_set_by_the_header_is_answered_waiting_on_every_host(serve, probe):
    client = serve()
    probe.behaviour = _held
    headers = {**scheduler_headers(time=FIRST), OVERLAP_HEADER: "wait"}
    holder = client.post(headers)[1]["run_key"]
    status, body = client.post({**scheduler_headers(time=SECOND), OVERLAP_HEADER: "wait"})
    assert (status, body["outcome"], body["waiting_for"]) == (409, "waiting", holder)
    assert probe.count == 1


def test_a_header_contradicting_the_option_is_misconfigured_on_every_host(serve, probe, records):
    status, body = serve(overlap="skip").post({**scheduler_headers(), OVERLAP_HEADER: "allow"})
    assert (status, body["outcome"]) == (500, "misconfigured")
    assert OVERLAP_HEADER in body["error"] and "overlap=" in body["error"]
    assert probe.count == 0 and records() == []
