"""The library's version on every record and every log line: an operator can tell which code
claimed a run, which finished it, and which wrote each line (on the Firestore emulator)."""

from __future__ import annotations

import runonce
from runonce import PermanentError
from runonce.contract import VERSION_FIELD

from .conftest import key_of, scheduler_headers


def test_a_run_s_claim_and_its_completion_name_the_library_version(client, probe, ledger, clock):
    seen = {}
    probe.behaviour = lambda request: seen.update(ledger.get(key_of(clock))) or "done"
    response = client.post("/", headers=scheduler_headers())
    assert response.json["outcome"] == "completed"
    assert (seen["status"], seen[VERSION_FIELD]) == ("in_progress", runonce.__version__)
    assert ledger.get(response.json["run_key"])[VERSION_FIELD] == runonce.__version__


def test_a_failed_run_s_record_names_the_library_version(client, probe, ledger):
    def job(request):
        raise PermanentError("the report's source is gone")

    probe.behaviour = job
    response = client.post("/", headers=scheduler_headers())
    record = ledger.get(response.json["run_key"])
    assert (record["status"], record[VERSION_FIELD]) == ("failed", runonce.__version__)


def test_a_run_taken_over_from_other_code_names_the_code_that_took_it_and_finished_it(
    client, probe, ledger, clock, tapped_client, collection
):
    crashed = ledger.claim(key_of(clock), {"job": "nightly-report"})
    tapped_client.collection(collection).document(crashed.key).update({VERSION_FIELD: "0.1.0"})
    clock.advance(121)  # the crashed attempt's lease is over
    taken = {}
    probe.behaviour = lambda request: taken.update(ledger.get(crashed.key)) or "done"
    response = client.post("/", headers=scheduler_headers())
    record = ledger.get(crashed.key)
    assert (response.json["outcome"], record["attempts"], taken["attempts"]) == ("completed", 2, 2)
    assert (taken[VERSION_FIELD], record[VERSION_FIELD]) == (runonce.__version__, runonce.__version__)


def test_the_version_rides_in_the_claim_and_completion_writes(client, tap):
    client.post("/", headers=scheduler_headers(job="warm-up"))  # the client's first connection
    tap.reset()
    assert client.post("/", headers=scheduler_headers()).json["outcome"] == "completed"
    assert tap.total() == 2


def test_every_log_line_of_a_handled_request_names_the_library_version(client, log_lines):
    client.post("/", headers=scheduler_headers())
    client.post("/", headers=scheduler_headers())  # a duplicate
    client.post("/", headers={"X-CloudScheduler-JobName": "nightly-report"})  # rejected
    lines = [line for _, line in log_lines()]
    assert {line.get("outcome") for line in lines} >= {"completed", "duplicate", "rejected"}
    assert {line.get(VERSION_FIELD) for line in lines} == {runonce.__version__}
