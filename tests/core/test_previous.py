"""`current_run().previous` through `@deduplicated` (docs/library.md), on both stores: a run reads
the result of its job's latest completed run scheduled before it, read once and only when the job
asks; a forced run reads it but is not entered."""

from __future__ import annotations

from datetime import timedelta

import flask
import pytest

import runonce
from runonce.scheduler.keys import rerun_slot
from tests.core.conftest import key_of, scheduler_headers
from tests.core.test_overlap import run_store

__all__ = ["run_store"]  # the fixture

OLDEST, EARLIER, LATER = "2026-11-29T02:50:00Z", "2026-11-29T02:55:00Z", "2026-11-29T03:00:00Z"
JOB = ("acme-prod", "europe-west1", "nightly-report")
"""Two runs of the job, both due by the time of the `clock` fixture (03:00:05): not forced."""
FORCED = "2026-11-29T04:00:00Z"
"""Ahead of the clock by more than the forced skew: a forced run."""


@pytest.fixture
def app(app_factory) -> flask.Flask:
    return app_factory()


def _deliver(app: flask.Flask, time: str) -> dict:
    answer = app.test_client().post("/", headers=scheduler_headers(time=time))
    assert answer.status_code == 200, answer.get_json()
    return answer.get_json()


def _syncing(seen: list):
    """A job that syncs from its previous run's cursor and returns the next cursor."""

    def sync(request):
        previous = runonce.current_run().previous
        seen.append(previous)
        cursor = 0 if previous is None else previous.result["cursor"]
        return {"cursor": cursor + 10}

    return sync


@pytest.mark.both_stores
def test_a_run_reads_the_result_of_the_previous_completed_run(app, probe, clock):
    seen: list = []
    probe.behaviour = _syncing(seen)
    assert _deliver(app, EARLIER)["result"] == {"cursor": 10}
    assert _deliver(app, LATER)["result"] == {"cursor": 20}
    assert seen[0] is None
    assert (seen[1].key, seen[1].schedule_time) == (key_of(clock, time=EARLIER), EARLIER)


@pytest.mark.both_stores
def test_a_run_delivered_after_a_later_one_reads_the_run_before_it_not_the_later_one(app, probe):
    seen: list = []
    probe.behaviour = _syncing(seen)
    _deliver(app, LATER)
    _deliver(app, EARLIER)  # a backfill, or a late retry: nothing completed before it
    assert seen == [None, None]


@pytest.mark.both_stores
def test_a_forced_run_reads_the_previous_but_is_not_entered(app, probe):
    seen: list = []
    probe.behaviour = _syncing(seen)
    _deliver(app, EARLIER)
    assert _deliver(app, FORCED)["result"] == {"cursor": 20}
    assert _deliver(app, LATER)["result"] == {"cursor": 20}  # the forced run did not move it
    assert [None if found is None else found.schedule_time for found in seen] == [None, EARLIER, EARLIER]


def test_the_previous_is_read_once_when_asked_and_never_when_not(app, probe, tap):
    probe.behaviour = lambda request: {"cursor": 1}
    _deliver(app, EARLIER)
    assert tap.calls["RunQuery"] == 0 and tap.calls["Commit"] == 2  # claim, completion (entry with it)

    def twice(request):
        run = runonce.current_run()
        return {"same": run.previous == run.previous}

    probe.behaviour = twice
    assert _deliver(app, LATER)["result"] == {"same": True}
    assert tap.calls["RunQuery"] == 1 and tap.calls["Commit"] == 4


@pytest.mark.both_stores
def test_a_rerun_of_an_older_run_reads_the_run_before_it_and_leaves_later_runs_previous(
    app, probe, clock, run_store
):
    probe.behaviour = lambda request: ("bad input", 400)
    failed = _deliver(app, OLDEST)
    assert failed["outcome"] == "failed"
    seen: list = []
    probe.behaviour = _syncing(seen)
    assert _deliver(app, EARLIER)["result"] == {"cursor": 10}
    run_store.request_rerun(
        rerun_slot(*JOB),
        failed["run_key"],
        {"by": "ops@example.com", "schedule_time": OLDEST},
        False,
        timedelta(hours=1),
    )
    rerun = _deliver(app, FORCED)
    assert (rerun["run_key"], rerun["result"]) == (failed["run_key"], {"cursor": 10})
    assert seen[1] is None  # nothing completed before the oldest run
    assert _deliver(app, LATER)["result"] == {"cursor": 20}  # EARLIER's, not the re-run's
    assert seen[2].schedule_time == EARLIER
