"""`runonce release`: a dead attempt's claim is released, fenced, recorded and logged; a live one is not."""

from __future__ import annotations

import json

import pytest

from runonce.contract import ACTIONS_FIELD
from runonce.core.store import Claim, StoredResult
from tests.conftest import SCHEDULED
from tests.operate.conftest import LEASE, ON_BOTH_STORES


@pytest.fixture(params=ON_BOTH_STORES)
def ledger_kind(request) -> str:
    """Every test here runs on a team on Firestore and on a team on Valkey."""
    return request.param


def test_release_of_a_live_lease_is_refused_and_changes_nothing(ops):
    claim = ops.claim_scheduled(SCHEDULED)
    before = ops.store.read(claim.key)
    result = ops.run("release", claim.key, "--team", ops.team.name, "--by", "tester")
    assert result.exit_code == 2
    assert "lease runs until" in result.stderr and "--force" in result.stderr
    assert ops.store.read(claim.key) == before


def test_release_of_an_expired_lease_ends_it_records_who_logs_it_and_the_next_delivery_takes_over(ops, clock):
    claim = ops.claim_scheduled(SCHEDULED)
    clock.advance(LEASE.total_seconds() + 5)
    result = ops.run("release", claim.key, "--team", ops.team.name, "--by", "tester")
    assert result.exit_code == 0, result.stderr
    record = ops.store.read(claim.key)
    [action] = record[ACTIONS_FIELD]
    assert (action["action"], action["by"], action["at"]) == ("release", "tester", clock())
    assert action["detail"]["attempt_id"] == claim.attempt_id
    assert record["lease_expires"] == clock()
    [line] = [json.loads(line) for line in result.stderr.splitlines() if line.startswith("{")]
    assert (line["action"], line["by"], line["run_key"], line["logger"]) == (
        "release",
        "tester",
        claim.key,
        "runonce.operate",
    )
    fresh = ops.claim_scheduled(SCHEDULED)
    assert isinstance(fresh, Claim) and fresh.attempt == 2


def test_release_forced_of_a_live_lease_releases_it_and_fences_out_the_attempt(ops):
    claim = ops.claim_scheduled(SCHEDULED)
    result = ops.run("release", claim.key, "--team", ops.team.name, "--by", "tester", "--force")
    assert result.exit_code == 0, result.stderr
    assert ops.store.fail(claim, "late") is False  # the live attempt's finishing write is refused
    assert ops.store.read(claim.key)[ACTIONS_FIELD][0]["detail"]["force"] is True


def test_release_of_a_finished_run_is_refused_and_of_an_unknown_key_exits_2(ops):
    claim = ops.claim_scheduled(SCHEDULED)
    ops.store.fail(claim, "bad input")
    finished = ops.run("release", claim.key, "--team", ops.team.name, "--by", "tester", "--force")
    assert finished.exit_code == 2 and "failed" in finished.stderr
    unknown = ops.run("release", "no-such-key", "--team", ops.team.name, "--by", "tester")
    assert unknown.exit_code == 2 and "KEY" in unknown.stderr
    assert ACTIONS_FIELD not in ops.store.read(claim.key)


def test_on_the_emulators_release_names_the_operator_by_user_without_by(ops, clock, monkeypatch):
    monkeypatch.setenv("USER", "alice")
    monkeypatch.setenv("LOGNAME", "alice")
    claim = ops.claim_scheduled(SCHEDULED)
    clock.advance(LEASE.total_seconds() + 1)
    assert ops.run("release", claim.key, "--team", ops.team.name).exit_code == 0
    assert ops.store.read(claim.key)[ACTIONS_FIELD][0]["by"] == "alice"


def test_a_release_whose_answer_never_came_exits_1_saying_it_may_have_been_written(ops, clock, monkeypatch):
    from runonce.core.errors import StoreUnavailable

    claim = ops.claim_scheduled(SCHEDULED)
    clock.advance(LEASE.total_seconds() + 1)
    store_class = type(ops.store)  # the command's store is of the same class: the ledger's, or Valkey's
    landed = store_class.release_held

    def lost(self, *args, **kwargs):
        landed(self, *args, **kwargs)
        raise StoreUnavailable("the store was unavailable (DeadlineExceeded)")

    monkeypatch.setattr(store_class, "release_held", lost)
    result = ops.run("release", claim.key, "--team", ops.team.name, "--by", "tester")
    assert result.exit_code == 1
    assert "may have been written" in result.stderr and f"runonce show {claim.key}" in result.stderr
    assert ops.store.read(claim.key)[ACTIONS_FIELD][0]["by"] == "tester"


def test_a_delivery_that_takes_the_run_over_between_the_read_and_the_release_is_not_released(
    ops, clock, monkeypatch
):
    stale = ops.claim_scheduled(SCHEDULED)
    clock.advance(LEASE.total_seconds() + 1)
    store_class = type(ops.store)  # the command's store is of the same class: the ledger's, or Valkey's
    read = store_class.read
    taken: list[Claim] = []

    def read_then_taken_over(self, key):
        record = read(self, key)
        taken.append(ops.claim_scheduled(SCHEDULED))  # a retry claims the run right after the look
        return record

    monkeypatch.setattr(store_class, "read", read_then_taken_over)
    result = ops.run("release", stale.key, "--team", ops.team.name, "--by", "tester")
    monkeypatch.undo()
    assert result.exit_code == 2 and "another attempt took the run over" in result.stderr
    record = ops.store.read(stale.key)
    assert record["attempt_id"] == taken[0].attempt_id and ACTIONS_FIELD not in record
    assert ops.store.complete(taken[0], StoredResult.of(1)) is not None  # the live attempt keeps it
