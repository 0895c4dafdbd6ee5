"""Leases, fencing and an operator's re-run on every host (tests/hosts/conftest.py), on both
stores: an attempt whose process died blocks its run until its lease expires, then one delivery
takes the run over, and the dead attempt can neither complete nor release it; a re-run an operator
requested is taken by the next forced delivery, which runs the run again under its own key."""

from __future__ import annotations

from datetime import timedelta

import pytest

from runonce import PermanentError
from runonce.core.store import StoredResult
from runonce.scheduler.keys import rerun_slot
from runonce.store.firestore import Ledger
from tests.core.conftest import LEASE, key_of, scheduler_headers

pytestmark = pytest.mark.both_stores


@pytest.fixture
def store(request, store_kind, memory_store, collection):
    """The store the app under test uses: the in-memory one, or a ledger on its collection."""
    if store_kind == "memory":
        return memory_store
    return Ledger(request.getfixturevalue("tapped_client"), collection, LEASE, timedelta(days=7))


def test_a_dead_attempt_blocks_its_run_until_its_lease_expires_then_one_takes_over(
    serve, probe, clock, store, records
):
    dead = store.claim(key_of(clock), {"job": "nightly-report"})  # its process then died
    client = serve()
    status, body = client.post(scheduler_headers())
    assert (status, body["outcome"]) == (409, "in_progress")
    clock.advance(LEASE.total_seconds() + 1)
    status, body = client.post(scheduler_headers())
    assert (status, body["outcome"], body["attempt"]) == (200, "completed", 2)
    assert probe.count == 1
    assert not store.complete(dead, StoredResult.of("from the dead attempt"))  # fenced: nothing written
    assert store.release(dead) is False
    [record] = records()
    assert (record["status"], record["attempts"], record["previous_attempt_id"]) == (
        "completed",
        2,
        dead.attempt_id,
    )


def test_an_operators_re_run_is_taken_by_the_next_forced_delivery_and_runs_the_run_again(
    serve, probe, clock, store
):
    client = serve()
    probe.behaviour = _empty_export
    status, body = client.post(scheduler_headers())
    assert (status, body["outcome"]) == (200, "failed")
    key = body["run_key"]
    slot = rerun_slot("acme-prod", "europe-west1", "nightly-report")
    fields = {"by": "oncall@example.com", "schedule_time": "2026-11-29T03:00:00Z"}
    store.request_rerun(slot, key, fields, False, timedelta(hours=1))
    probe.behaviour = lambda: "exported"
    status, body = client.post(scheduler_headers(time="2026-11-29T04:00:00Z"))  # "Force run"
    assert (status, body["outcome"], body["run_key"], body["result"]) == (200, "completed", key, "exported")
    assert body["rerun_delivery"] != key
    assert probe.count == 2 and not probe.runs[1].forced


def _empty_export():
    raise PermanentError("the export was empty")
