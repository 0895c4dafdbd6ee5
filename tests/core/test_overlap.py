"""A job's overlap policy through `@deduplicated` (docs/schedules/overlap.md), on both stores: the policy
comes from the X-Runonce-Overlap header or the decorator option; a `skip` job's run that meets
another run in progress is answered 200 `skipped` and recorded so, a `wait` job's is answered 409
`waiting` with nothing written, an `allow` job's runs overlap; forced runs and operators'
re-runs follow the policy; a crashed holder's lock ends with its lease."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import timedelta
from typing import cast

import flask
import pytest

import runonce
from emulator.wire import Fault
from runonce.contract import OVERLAP_HEADER, SKIPPED_FOR_FIELD
from runonce.core.store import Store, waiting_note
from runonce.scheduler.keys import job_lock, rerun_slot
from runonce.store.firestore import Ledger, LedgerStore
from runonce.store.memory import MemoryStore
from tests.core.conftest import LEASE, key_of, scheduler_headers
from tests.core.test_deadlines import short_budgets as short_budgets  # the fixture
from tests.store.test_conformance_overlap import at_once

FIRST_TIME = "2026-11-29T02:55:00Z"
SECOND_TIME = "2026-11-29T03:00:00Z"
"""Two runs of the job, both due by the time of the `clock` fixture (03:00:05): not forced."""
LOCK = job_lock("acme-prod", "europe-west1", "nightly-report")


def _headers(time: str = FIRST_TIME, overlap: str | None = "skip") -> dict[str, str]:
    headers = scheduler_headers(time=time)
    if overlap is not None:
        headers[OVERLAP_HEADER] = overlap
    return headers


def _post(app: flask.Flask, headers: dict[str, str]) -> tuple[int, dict]:
    answer = app.test_client().post("/", headers=headers)
    return answer.status_code, answer.get_json()


@pytest.fixture
def app(app_factory) -> flask.Flask:
    return app_factory()


@pytest.fixture
def run_store(request, store_kind, memory_store, collection) -> Store:
    """The store the app under test uses, to read and write it as an operator would."""
    if isinstance(memory_store, MemoryStore):
        return memory_store
    client = request.getfixturevalue("tapped_client")
    return LedgerStore(Ledger(client, collection, LEASE, timedelta(days=7)))


@contextmanager
def first_run_in_progress(app: flask.Flask, probe, headers: dict[str, str]) -> Iterator[list]:
    """Deliver `headers` on a thread whose job body blocks until the block ends; the answer it got
    is in the list yielded, once the block has ended."""
    started, release = threading.Event(), threading.Event()
    behaviour = probe.behaviour

    def block(request):
        if not started.is_set():
            started.set()
            release.wait(30)
            return {"run": "first"}
        return behaviour(request)

    probe.behaviour = block
    answers: list = []
    thread = threading.Thread(target=lambda: answers.append(_post(app, headers)))
    thread.start()
    assert started.wait(30), "the first run's body never started"
    try:
        yield answers
    finally:
        release.set()
        thread.join(30)


@pytest.mark.both_stores
def test_a_skip_jobs_run_that_meets_a_run_in_progress_is_answered_skipped_and_never_runs(
    app, probe, clock, run_store
):
    first = key_of(clock, time=FIRST_TIME)
    with first_run_in_progress(app, probe, _headers()) as answers:
        status, body = _post(app, _headers(SECOND_TIME))
        assert (status, body["outcome"], body["skipped_for"]) == (200, "skipped", first)
    assert answers == [(200, {**answers[0][1], "outcome": "completed"})]
    second = body["run_key"]
    record = run_store.read(second)
    assert (record["status"], record[SKIPPED_FOR_FIELD]) == ("skipped", first)
    # Its retries, and deliveries long after the first run ended, are told it was skipped.
    clock.advance(2 * LEASE.total_seconds())
    status, body = _post(app, _headers(SECOND_TIME))
    assert (status, body["outcome"], body["status"], body["skipped_for"]) == (
        200,
        "duplicate",
        "skipped",
        first,
    )
    assert probe.count == 1 and probe.runs[0].key == first


@pytest.mark.both_stores
def test_a_wait_jobs_run_is_answered_409_waiting_then_runs_once_after_the_run_before_it(
    app, probe, clock, run_store
):
    first = key_of(clock, time=FIRST_TIME)
    with first_run_in_progress(app, probe, _headers(overlap="wait")):
        status, body = _post(app, _headers(SECOND_TIME, "wait"))
        assert (status, body["outcome"], body["waiting_for"]) == (409, "waiting", first)
        assert run_store.read(body["run_key"]) is None  # no record: a retry claims it later
        note = run_store.read(waiting_note(body["run_key"]))  # only a note that it waited
        assert note is not None and (note["waiting_run"], note["waiting_for"]) == (body["run_key"], first)
        assert "job" not in note and "status" not in note  # no listing reads it as a run
    status, body = _post(app, _headers(SECOND_TIME, "wait"))
    assert (status, body["outcome"], body["attempt"]) == (200, "completed", 1)
    assert _post(app, _headers(SECOND_TIME, "wait"))[1]["outcome"] == "duplicate"
    assert [run.schedule_time for run in probe.runs] == [FIRST_TIME, SECOND_TIME]
    assert run_store.read(LOCK) is None  # freed by the completion


@pytest.mark.both_stores
def test_an_allow_jobs_runs_overlap_and_write_no_lock(app, probe, run_store):
    with first_run_in_progress(app, probe, _headers(overlap=None)):
        status, body = _post(app, _headers(SECOND_TIME, None))
        assert (status, body["outcome"]) == (200, "completed")
        assert run_store.read(LOCK) is None
    status, body = _post(app, _headers(SECOND_TIME, "allow"))
    assert body["outcome"] == "duplicate"
    assert probe.count == 2


@pytest.mark.both_stores
def test_the_decorator_option_sets_the_policy_when_no_header_does(app_factory, probe):
    app = app_factory(overlap="skip")
    with first_run_in_progress(app, probe, _headers(overlap=None)):
        status, body = _post(app, _headers(SECOND_TIME, None))
    assert (status, body["outcome"]) == (200, "skipped")
    assert probe.count == 1


@pytest.mark.both_stores
def test_a_header_and_an_option_that_agree_are_one_policy(app_factory, probe):
    app = app_factory(overlap=runonce.contract.Overlap.WAIT)
    with first_run_in_progress(app, probe, _headers(overlap="WAIT")):
        status, body = _post(app, _headers(SECOND_TIME, "wait"))
    assert (status, body["outcome"]) == (409, "waiting")


@pytest.mark.both_stores
def test_a_header_and_an_option_that_differ_are_misconfigured_naming_both_and_nothing_runs(
    app_factory, probe, records
):
    status, body = _post(app_factory(overlap="wait"), _headers(overlap="skip"))
    assert (status, body["outcome"]) == (500, "misconfigured")
    assert OVERLAP_HEADER in body["error"] and "overlap=" in body["error"]
    assert "skip" in body["error"] and "wait" in body["error"]
    assert probe.count == 0 and records() == []


@pytest.mark.both_stores
def test_an_unknown_header_value_is_misconfigured_naming_the_header_and_the_policies(app, probe, records):
    status, body = _post(app, _headers(overlap="skipp"))
    assert (status, body["outcome"]) == (500, "misconfigured")
    assert OVERLAP_HEADER in body["error"] and "'skipp'" in body["error"]
    assert "allow, skip, wait" in body["error"]
    assert probe.count == 0 and records() == []


@pytest.mark.both_stores
def test_an_unknown_decorator_option_is_misconfigured_naming_it(app_factory, probe):
    status, body = _post(app_factory(overlap="sometimes"), _headers(overlap=None))
    assert (status, body["outcome"]) == (500, "misconfigured")
    assert "overlap (decorator option)='sometimes'" in body["error"]
    assert probe.count == 0


@pytest.mark.both_stores
def test_a_crashed_holders_lock_ends_with_its_lease(app, probe, clock, run_store):
    first = key_of(clock, time=FIRST_TIME)
    with first_run_in_progress(app, probe, _headers(overlap="wait")) as answers:
        assert _post(app, _headers(SECOND_TIME, "wait"))[0] == 409
        clock.advance(LEASE.total_seconds())  # the first run's instance is gone: its lease ends
        status, body = _post(app, _headers(SECOND_TIME, "wait"))
        assert (status, body["outcome"]) == (200, "completed")
        assert run_store.read(LOCK) is None
    # The first run's body did end after all: its completion lands on its own record alone.
    assert answers[0][1]["outcome"] == "completed" and run_store.read(first)["status"] == "completed"
    assert probe.count == 2


@pytest.mark.both_stores
def test_an_outcome_unknown_hold_keeps_the_job_held_as_long(app, probe, clock):
    probe.behaviour = lambda request: (_ for _ in ()).throw(runonce.OutcomeUnknown("lost answer", 600))
    assert _post(app, _headers())[1]["outcome"] == "in_progress"
    probe.behaviour = lambda request: "second"
    clock.advance(599)
    assert _post(app, _headers(SECOND_TIME))[1]["outcome"] == "skipped"
    clock.advance(1)
    assert _post(app, _headers("2026-11-29T02:50:00Z"))[1]["outcome"] == "completed"


@pytest.mark.both_stores
def test_a_forced_run_while_another_holds_the_job_follows_the_policy(app, probe, clock):
    with first_run_in_progress(app, probe, _headers()):
        status, body = _post(app, _headers("2026-11-30T03:00:00Z"))  # "Force run": the next time
    assert (status, body["outcome"]) == (200, "skipped")
    assert probe.count == 1


@pytest.mark.both_stores
@pytest.mark.parametrize("policy", ["skip", "wait"])
def test_an_operators_rerun_while_another_run_holds_the_job_follows_the_policy(
    app, probe, clock, run_store, policy
):
    probe.behaviour = lambda request: ("bad input", 400)
    status, body = _post(app, _headers(FIRST_TIME, policy))
    assert (status, body["outcome"]) == (200, "failed")
    failed = body["run_key"]
    slot = rerun_slot("acme-prod", "europe-west1", "nightly-report")
    run_store.request_rerun(
        slot, failed, {"by": "ops@example.com", "schedule_time": FIRST_TIME}, False, timedelta(hours=1)
    )
    probe.behaviour = lambda request: "fixed"
    forced = _headers("2026-11-30T03:00:00Z", policy)
    with first_run_in_progress(app, probe, _headers(SECOND_TIME, policy)):
        status, body = _post(app, forced)
        assert body["run_key"] == failed
        if policy == "skip":
            assert (status, body["outcome"], body["skipped_for"]) == (
                200,
                "skipped",
                key_of(clock, time=SECOND_TIME),
            )
            assert run_store.read(failed)["status"] == "skipped"
        else:
            assert (status, body["outcome"]) == (409, "waiting")
    if policy == "wait":  # Scheduler retries the forced delivery: the re-run runs, once the job is free
        status, body = _post(app, forced)
        assert (status, body["outcome"], body["run_key"], body["result"]) == (
            200,
            "completed",
            failed,
            "fixed",
        )
    assert probe.count == (3 if policy == "wait" else 2)


def test_a_locked_claim_that_lands_after_its_attempt_gave_up_is_deleted_with_its_lock(
    short_budgets, app, probe, tap, run_store, log_lines
):
    # The claim's commit (run and lock) reaches the store 2 s late, after store_unavailable.
    tap.inject(Fault("Commit", hang=2.0, after_send=True, times=1))
    assert _post(app, _headers())[1]["outcome"] == "store_unavailable"
    deadline, removed = time.monotonic() + 8, []
    while not removed and time.monotonic() < deadline:
        time.sleep(0.1)
        removed = [
            line for _, line in log_lines() if line["message"].startswith("deleted a claim that landed")
        ]
    assert removed and run_store.read(LOCK) is None
    # So the job is free: the next run is not skipped for a run that never ran.
    status, body = _post(app, _headers(SECOND_TIME))
    assert (status, body["outcome"]) == (200, "completed")
    assert probe.count == 1


@pytest.mark.both_stores
def test_two_runs_of_a_skip_job_delivered_at_once_four_times_each_give_one_body_and_one_skipped_record(
    app, probe, run_store
):
    probe.behaviour = lambda request: time.sleep(0.3) or "ran"
    deliveries = [_headers(FIRST_TIME), _headers(SECOND_TIME)] * 4
    answers = cast(
        list[tuple[int, dict]], at_once([lambda h=headers: _post(app, h) for headers in deliveries])
    )
    assert len(answers) == 8 and all(status < 500 for status, _ in answers), answers
    assert probe.count == 1
    ran = probe.runs[0].key
    [other] = {body["run_key"] for _, body in answers} - {ran}
    record = run_store.read(other)
    assert (record["status"], record[SKIPPED_FOR_FIELD]) == ("skipped", ran)
    assert run_store.read(ran)["status"] == "completed" and run_store.read(LOCK) is None
