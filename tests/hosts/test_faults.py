"""The adversarial cases on the wire to Firestore, on every host (tests/hosts/conftest.py): a
store that is down at the claim, a claim and a completion whose answers are lost. The tap injects
the faults on the emulator's wire, so these run on the emulator alone."""

from __future__ import annotations

import pytest

from emulator.wire import Fault
from tests.core.conftest import scheduler_headers


# Each try waits out the claim's 10 s deadline: one WSGI and one ASGI host besides core's functions-framework.
@pytest.mark.parametrize("host", ["django", "fastapi-async"], indirect=True)
def test_a_store_down_at_the_claim_answers_500_store_unavailable_and_runs_nothing(serve, probe, tap):
    tap.inject(Fault("Commit", times=100))
    status, body = serve().post(scheduler_headers())
    assert (status, body["outcome"]) == (500, "store_unavailable")
    assert probe.count == 0


def test_a_claim_whose_answer_was_lost_is_recognised_as_ours(serve, probe, tap, records):
    tap.inject(Fault("Commit", after_send=True))  # the create lands, its answer does not
    status, body = serve().post(scheduler_headers())
    assert (status, body["outcome"]) == (200, "completed")
    assert probe.count == 1 and records()[0]["attempts"] == 1


def test_a_completion_whose_answer_was_lost_is_recognised_and_not_run_again(serve, probe, tap, records):
    client = serve()
    probe.behaviour = lambda: tap.inject(Fault("Commit", after_send=True)) or "ok"
    status, body = client.post(scheduler_headers())
    assert (status, body["outcome"], body["recorded"]) == (200, "completed", True)
    status, body = client.post(scheduler_headers())
    assert (status, body["outcome"]) == (200, "duplicate")
    assert probe.count == 1 and records()[0]["status"] == "completed"
