"""The missed-run requests of the `Store` conformance suite (docs/schedules/backfill.md): a backfill's or a
catch-up's request, on the Firestore ledger (the real emulator), on the Valkey store (a real
server) and on the in-memory store.

What a store must do: accept a request for a run with no record, and have the forced delivery
that consumes it create that run's claim under the run's own key, saying what caused it; start a
run left in progress under an ended lease (or failed, when asked) the same way; start nothing
when the run's record changed between the request and its delivery, nor for a completed run;
refuse a request whose run changed since its caller listed it; and let the forced delivery's key,
the same until the job's next scheduled time, carry one missed run after another once each has
finished, never while one still runs.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from runonce.contract import ACTIONS_FIELD, RunStatus
from runonce.core import store as api
from runonce.core.requests import RequestPending, RerunRefused, RunChanged
from runonce.core.store import Claim, Held, Rerun, Store, StoredResult
from tests.store.test_conformance_rerun import FORCED, FORCED_FIELDS, RUN, SLOT, TTL, kind, store

__all__ = ["kind", "store"]  # the fixtures, shared with the re-run suite

OTHER = "run-of-2026-11-29T04:00:00Z"
TIMES = {RUN: "2026-11-29T03:00:00Z", OTHER: "2026-11-29T04:00:00Z"}


def _missed(
    store: Store, key: str = RUN, seen: dict[str, Any] | None = None, cause: str = api.Cause.BACKFILL.value
):
    """File a missed run's request for `key`, whose record its caller saw as `seen` (None: none)."""
    fields = {
        "by": "ops@example.com",
        "schedule_time": TIMES[key],
        api.CAUSE_FIELD: cause,
        api.EXPECTED_ATTEMPT_FIELD: None if seen is None else seen.get("attempt_id"),
        api.EXPECTED_STATUS_FIELD: None if seen is None else seen.get("status"),
    }
    return store.request_rerun(SLOT, key, fields, False, TTL)


def _deliver(store: Store) -> Rerun | None:
    return store.take_rerun(SLOT, FORCED, dict(FORCED_FIELDS, project="p", location="l"))


def test_a_request_for_a_run_with_no_record_is_pending_and_its_delivery_creates_the_runs_claim(store):
    request = _missed(store)
    assert store.read(RUN) is None  # filing writes the slot only
    rerun = _deliver(store)
    assert rerun is not None and rerun.claim is not None
    assert (rerun.key, rerun.schedule_time, rerun.claim.attempt) == (RUN, TIMES[RUN], 1)
    record = store.read(RUN)
    assert record is not None
    assert (record["status"], record["schedule_time"], record["forced"], record["job"]) == (
        "in_progress",
        TIMES[RUN],
        False,
        "acme-nightly",
    )
    assert (record[api.CAUSE_FIELD], record[api.CAUSE_REQUEST_FIELD], record[api.CAUSE_BY_FIELD]) == (
        "backfill",
        request.request_id,
        "ops@example.com",
    )
    [action] = record[ACTIONS_FIELD]
    assert (action["action"], action["by"]) == ("backfill", "ops@example.com")
    assert request.request_id in action["detail"]
    assert store.complete(rerun.claim, StoredResult.of({"rows": 1})) is not None
    assert store.read(RUN)["status"] == "completed"


def test_a_catch_up_request_says_so_on_the_run(store):
    _missed(store, cause=api.Cause.CATCH_UP.value)
    assert _deliver(store) is not None
    assert store.read(RUN)[api.CAUSE_FIELD] == "catch_up"


def test_a_retried_out_run_is_reopened_under_its_key_and_its_dead_attempt_fenced_out(store, clock):
    dead = store.claim(RUN, {"job": "acme-nightly"})
    assert isinstance(dead, Claim)
    clock.advance(121)
    seen = store.read(RUN)
    _missed(store, seen=seen)
    rerun = _deliver(store)
    assert rerun is not None and rerun.claim is not None and rerun.claim.attempt == 2
    assert not store.fail(dead, "the dead attempt wakes up")
    assert store.read(RUN)[api.CAUSE_FIELD] == "backfill"


def test_a_request_whose_run_changed_since_it_was_listed_is_refused_and_writes_nothing(store):
    claim = store.claim(RUN, {"job": "acme-nightly"})
    assert isinstance(claim, Claim) and store.complete(claim, StoredResult.of(1)) is not None
    with pytest.raises(RunChanged, match="changed since it was listed"):
        _missed(store)  # listed as never delivered; it has a completed record now
    assert store.read(SLOT) is None


def test_a_request_for_a_completed_run_is_refused_even_as_seen(store):
    claim = store.claim(RUN, {"job": "acme-nightly"})
    assert isinstance(claim, Claim) and store.complete(claim, StoredResult.of(1)) is not None
    with pytest.raises(RerunRefused, match="completed"):
        _missed(store, seen=store.read(RUN))
    assert store.read(SLOT) is None


def test_a_run_that_got_a_record_between_request_and_delivery_is_not_run_and_the_request_is_void(store):
    _missed(store)
    claim = store.claim(RUN, {"job": "acme-nightly"})  # its late scheduled delivery, say
    assert isinstance(claim, Claim)
    assert _deliver(store) is None  # an ordinary forced run then
    assert store.read(SLOT)[api.REQUEST_STATE_FIELD] == api.RequestState.VOID.value
    assert store.read(RUN)["attempt_id"] == claim.attempt_id


def test_a_run_that_completed_late_under_its_dead_attempt_is_not_run_again(store, clock):
    dead = store.claim(RUN, {"job": "acme-nightly"})
    assert isinstance(dead, Claim)
    clock.advance(121)
    _missed(store, seen=store.read(RUN))
    assert store.complete(dead, StoredResult.of(1)) is not None  # its fence still held
    assert _deliver(store) is None
    assert store.read(RUN)["status"] == "completed"


def test_a_second_request_while_one_is_pending_is_refused_as_pending(store):
    _missed(store)
    with pytest.raises(RequestPending):
        _missed(store, OTHER)
    with pytest.raises(RequestPending):
        _missed(store)  # two operators listing the same missed run


def test_a_run_started_by_one_request_is_refused_to_the_next_as_changed(store):
    _missed(store)
    assert _deliver(store) is not None
    with pytest.raises(RunChanged):
        _missed(store)  # the second operator listed it before it ran


def test_the_forced_key_carries_a_second_missed_run_once_the_first_has_finished(store):
    _missed(store)
    first = _deliver(store)
    assert first is not None and first.claim is not None
    second_request = _missed(store, OTHER)
    told = _deliver(store)
    assert told == Rerun(RUN, TIMES[RUN], None, "backfill")  # the first still runs: this may be its retry
    assert store.read(SLOT)["request_id"] == second_request.request_id
    assert store.read(SLOT)[api.REQUEST_STATE_FIELD] == "pending"
    assert store.complete(first.claim, StoredResult.of(1)) is not None
    second = _deliver(store)
    assert second is not None and second.claim is not None and second.key == OTHER
    assert store.read(OTHER)[api.CAUSE_REQUEST_FIELD] == second_request.request_id
    marker = store.read(FORCED)
    assert (marker[api.RERUN_OF_FIELD], marker["carried_before"]) == (OTHER, [RUN])
    again = _deliver(store)  # a retry of the second delivery
    assert again == Rerun(OTHER, TIMES[OTHER], None, "backfill")  # told its cause too
    assert store.read(RUN)["status"] == "completed"


def test_a_failed_missed_run_is_run_again_only_as_seen(store):
    claim = store.claim(RUN, {"job": "acme-nightly"})
    assert isinstance(claim, Claim) and store.fail(claim, "refused")
    _missed(store, seen=store.read(RUN))
    rerun = _deliver(store)
    assert rerun is not None and rerun.claim is not None and rerun.claim.attempt == 2
    held = store.claim(RUN, {"job": "acme-nightly"})
    assert isinstance(held, Held) and held.status is RunStatus.IN_PROGRESS


def test_a_missed_runs_request_times_are_checked_like_a_reruns(store):
    with pytest.raises(RerunRefused, match="RFC 3339"):
        store.request_rerun(
            SLOT,
            RUN,
            {"by": "x", "schedule_time": "yesterday", api.CAUSE_FIELD: "backfill"},
            False,
            timedelta(minutes=1),
        )
