"""Defect class 7: a hung store. Every store call carries a deadline from its operation's budget
(claim 10 s, finishing write 30 s, in all), and a claim that lands after its attempt gave up is
found and deleted so the run's retries need not wait out its lease. The hang tests shrink the
budgets so they run in seconds; the first test checks the real ones on the wire."""

from __future__ import annotations

import time

import pytest

from emulator.wire import Fault
from runonce.store import firestore as ledger_module

from .conftest import scheduler_headers


def test_every_store_call_carries_a_deadline_within_its_budget(client, probe, tap):
    probe.behaviour = lambda request: 1 / 0  # claim, then release
    client.post("/", headers=scheduler_headers(time="2026-11-29T01:00:00Z"))
    probe.behaviour = lambda request: "ok"  # claim, then completion
    client.post("/", headers=scheduler_headers())
    client.post("/", headers=scheduler_headers())  # duplicate: create fails, then a read
    methods = [method for method, _ in tap.deadlines]
    assert methods == ["Commit", "Commit", "Commit", "Commit", "Commit", "BatchGetDocuments"]
    claim, release, complete = ledger_module.CLAIM_SECONDS, ledger_module.RELEASE_SECONDS, 30.0
    budgets = [claim, release, claim, complete, claim, claim]
    for (method, timeout), budget in zip(tap.deadlines, budgets, strict=True):
        assert timeout is not None and 0 < timeout <= budget, (method, timeout, budget)
    assert ledger_module.CLAIM_SECONDS == 10 and complete == ledger_module.FINISH_SECONDS


@pytest.fixture
def short_budgets(monkeypatch):
    """Budgets of 1 s (claim, release) and 2 s (finishing write); background looks every 0.25 s."""
    monkeypatch.setattr(ledger_module, "CLAIM_SECONDS", 1.0)
    monkeypatch.setattr(ledger_module, "RELEASE_SECONDS", 1.0)
    monkeypatch.setattr(ledger_module, "FINISH_SECONDS", 2.0)
    monkeypatch.setattr(ledger_module, "ABANDONED_CLAIM_CHECKS", (0.0,) + (0.25,) * 20)


def test_a_hung_store_at_the_claim_is_given_up_on_within_the_claim_budget(
    short_budgets, client, probe, tap, log_lines
):
    tap.inject(Fault("Commit", hang=30, times=100))
    started = time.monotonic()
    response = client.post("/", headers=scheduler_headers())
    elapsed = time.monotonic() - started
    assert response.status_code == 500 and response.json["outcome"] == "store_unavailable"
    assert elapsed < 3.0, elapsed  # the budget (1 s), not the 60 s a call would wait by default
    assert probe.count == 0
    [(_, line)] = [entry for entry in log_lines() if entry[1].get("outcome") == "store_unavailable"]
    assert "the store was unavailable" in line["message"] and line["run_key"] == response.json["run_key"]


def test_a_hung_store_at_completion_is_given_up_on_within_the_finish_budget(
    short_budgets, client, probe, tap, log_lines
):
    probe.behaviour = lambda request: tap.inject(Fault("Commit", hang=30, times=100)) or "ok"
    started = time.monotonic()
    response = client.post("/", headers=scheduler_headers())
    elapsed = time.monotonic() - started
    assert response.status_code == 200 and response.json["outcome"] == "completed"
    assert response.json["recorded"] is False
    assert elapsed < 4.0, elapsed  # the budget (2 s), with room for a loaded machine
    [(_, line)] = [entry for entry in log_lines() if entry[1].get("recorded") is False]
    assert "the completion write failed: the store was unavailable" in line["message"]
    assert (line["run_key"], line["job"]) == (response.json["run_key"], "nightly-report")


def test_a_claim_that_lands_after_its_attempt_gave_up_does_not_block_the_retries(
    short_budgets, client, probe, tap, records, log_lines
):
    # The create reaches the store 2 s late, long after the attempt answered store_unavailable.
    tap.inject(Fault("Commit", hang=2.0, after_send=True, times=1))
    first = client.post("/", headers=scheduler_headers())
    assert first.json["outcome"] == "store_unavailable"
    deadline, removed = time.monotonic() + 8, []
    while not removed and time.monotonic() < deadline:
        time.sleep(0.1)
        removed = [
            line for _, line in log_lines() if line["message"].startswith("deleted a claim that landed")
        ]
    [line] = removed  # the background look found the late claim and deleted it
    assert (line["run_key"], line["job"]) == (first.json["run_key"], "nightly-report")
    assert records() == []
    retry = client.post("/", headers=scheduler_headers())
    assert retry.status_code == 200 and retry.json["outcome"] == "completed"
    assert probe.count == 1


def test_a_claim_whose_answer_is_lost_after_a_stall_is_recognised_as_ours(
    short_budgets, client, probe, tap, monkeypatch
):
    # The create stalls, lands, and its answer is lost; the retry finds our own record.
    monkeypatch.setattr(ledger_module, "CLAIM_SECONDS", 3.0)
    tap.inject(Fault("Commit", hang=0.5, after_send=True, times=1))
    response = client.post("/", headers=scheduler_headers())
    assert response.json["outcome"] == "completed" and response.json["attempt"] == 1
    assert probe.count == 1
