"""@deduplicated end to end on the real Firestore emulator: what Scheduler is answered, what the
job body really ran, and what the ledger holds afterwards."""

from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pytest
import requests
from werkzeug.serving import make_server

from emulator.wire import Fault
from runonce import PermanentError

from .conftest import key_of, scheduler_headers


def _deliver_at_once(app, count: int) -> list[int]:
    """Send `count` copies of one delivery released together by a barrier; their status codes."""
    start = threading.Barrier(count)

    def deliver(_):
        with app.test_client() as client:
            start.wait()
            return client.post("/", headers=scheduler_headers()).status_code

    with ThreadPoolExecutor(count) as pool:
        return list(pool.map(deliver, range(count)))


@pytest.mark.both_stores
def test_first_delivery_runs_the_job_and_answers_200(client, probe, records):
    response = client.post("/", headers=scheduler_headers())
    assert response.status_code == 200
    assert response.json["outcome"] == "completed"
    assert response.json["result"] == {"rows": 42}
    assert probe.count == 1
    [record] = records()
    assert record["status"] == "completed"
    assert record["job"] == "nightly-report"
    assert record["schedule_time"] == "2026-11-29T03:00:00Z"
    assert record["attempts"] == 1
    assert record["expire_at"] > record["finished_at"]


@pytest.mark.both_stores
def test_a_result_that_is_not_json_is_neither_stored_nor_answered(client, probe, records):
    probe.behaviour = lambda request: object()
    response = client.post("/", headers=scheduler_headers())
    assert response.status_code == 200
    assert response.json["outcome"] == "completed" and response.json["result"] is None
    assert response.json["result_stored"] is False
    assert response.json["result_dropped"].startswith("not JSON")
    [record] = records()
    assert record["status"] == "completed" and record["result_stored"] is False
    assert record["result_dropped"] == response.json["result_dropped"]


@pytest.mark.both_stores
def test_duplicate_of_a_completed_run_answers_200_without_running(client, probe):
    client.post("/", headers=scheduler_headers())
    again = client.post("/", headers=scheduler_headers())
    assert again.status_code == 200
    assert again.json["outcome"] == "duplicate"
    assert again.json["status"] == "completed"
    assert again.json["result"] == {"rows": 42}
    assert probe.count == 1


def test_fifty_simultaneous_deliveries_run_the_job_once_and_never_answer_5xx(app_factory, probe):
    probe.behaviour = lambda request: time.sleep(0.3)
    statuses = _deliver_at_once(app_factory(), 50)
    assert probe.count == 1
    assert all(status in (200, 409) for status in statuses), statuses
    assert statuses.count(200) >= 1


@pytest.fixture
def server(app_factory):
    """The app on a real loopback HTTP server, so a client can give up on it like Scheduler does."""
    httpd = make_server("127.0.0.1", 0, app_factory(), threaded=True)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_port}/"
    httpd.shutdown()


def test_retry_while_the_first_attempt_runs_answers_409(server, probe):
    release = threading.Event()
    probe.behaviour = lambda request: release.wait(10)
    with pytest.raises(requests.Timeout):
        requests.post(server, headers=scheduler_headers(), timeout=0.5)  # attempt deadline passes
    retry = requests.post(server, headers=scheduler_headers(), timeout=5)
    release.set()
    assert retry.status_code == 409
    assert retry.json()["outcome"] == "in_progress"
    assert probe.count == 1


def test_lost_response_then_retry_is_skipped(server, probe):
    finished = threading.Event()

    def slow_job(request):
        time.sleep(0.6)
        finished.set()
        return "done"

    probe.behaviour = slow_job
    with pytest.raises(requests.Timeout):
        requests.post(server, headers=scheduler_headers(), timeout=0.2)  # the 2xx never reaches Scheduler
    assert finished.wait(5)
    time.sleep(0.2)  # let the completion write land
    retry = requests.post(server, headers=scheduler_headers(), timeout=5)
    assert retry.status_code == 200
    assert retry.json()["outcome"] == "duplicate"
    assert probe.count == 1


@pytest.mark.both_stores
def test_retryable_failure_answers_500_releases_the_claim_and_the_retry_completes(client, probe, records):
    probe.behaviour = lambda request: 1 / 0
    first = client.post("/", headers=scheduler_headers())
    assert first.status_code == 500
    assert first.json == {"outcome": "retry", "run_key": first.json["run_key"], "error": "ZeroDivisionError"}
    assert records() == []
    probe.behaviour = lambda request: "ok"
    retry = client.post("/", headers=scheduler_headers())
    assert retry.status_code == 200 and retry.json["outcome"] == "completed"
    assert probe.count == 2
    assert [record["status"] for record in records()] == ["completed"]


@pytest.mark.both_stores
def test_permanent_failure_answers_2xx_and_is_never_run_again(client, probe, records, capsys):
    def broken(request):
        raise PermanentError("report source deleted")

    probe.behaviour = broken
    first = client.post("/", headers=scheduler_headers())
    assert first.status_code == 200
    assert first.json["outcome"] == "failed"
    again = client.post("/", headers=scheduler_headers())
    assert again.status_code == 200
    assert again.json["status"] == "failed"
    assert again.json["error"] == "report source deleted"
    assert probe.count == 1
    [record] = records()
    assert record["status"] == "failed"
    logged = capsys.readouterr().out
    assert '"severity": "ERROR"' in logged and first.json["run_key"] in logged


def test_crashed_attempt_blocks_retries_until_its_lease_expires(client, probe, clock, ledger):
    ledger.claim(key_of(clock), {"job": "nightly-report"})  # its process then died
    blocked = client.post("/", headers=scheduler_headers())
    assert blocked.status_code == 409
    clock.advance(119)
    assert client.post("/", headers=scheduler_headers()).status_code == 409
    clock.advance(2)
    taken = client.post("/", headers=scheduler_headers())
    assert taken.status_code == 200 and taken.json["attempt"] == 2
    assert probe.count == 1


def test_stale_attempt_can_neither_complete_nor_release_the_new_claim(client, clock, ledger):
    stale = ledger.claim(key_of(clock), {"job": "nightly-report"})
    clock.advance(121)
    client.post("/", headers=scheduler_headers())
    assert ledger.complete(stale) is False
    assert ledger.release(stale) is False
    record = ledger.get(stale.key)
    assert record["status"] == "completed" and record["attempt_id"] != stale.attempt_id


def test_after_lease_expiry_exactly_one_of_many_retries_takes_over(app_factory, probe, clock, ledger):
    crashed = ledger.claim(key_of(clock), {"job": "nightly-report"})  # its process then died
    clock.advance(121)
    probe.behaviour = lambda request: time.sleep(0.2)
    statuses = _deliver_at_once(app_factory(), 20)
    assert probe.count == 1
    assert set(statuses) <= {200, 409}
    record = ledger.get(crashed.key)
    assert (record["status"], record["attempts"], record["previous_attempt_id"]) == (
        "completed",
        2,
        crashed.attempt_id,
    )


@pytest.mark.both_stores
def test_delivery_older_than_the_retention_is_not_run(client, probe, clock, records):
    # A replay of a run whose record the TTL policy may already have deleted.
    clock.advance(7 * 24 * 3600)
    response = client.post("/", headers=scheduler_headers())
    assert response.status_code == 200 and response.json["outcome"] == "too_old"
    assert probe.count == 0
    assert records() == []


@pytest.mark.both_stores
def test_delivery_within_the_retention_still_runs(client, probe, clock):
    clock.advance(7 * 24 * 3600 - 10)
    assert client.post("/", headers=scheduler_headers()).json["outcome"] == "completed"
    assert probe.count == 1


@pytest.mark.both_stores
def test_same_run_written_with_other_header_case_and_offset_runs_once(client, probe):
    client.post("/", headers=scheduler_headers(time="2026-11-29T03:00:00Z"))
    lowered = {
        name.lower(): value for name, value in scheduler_headers(time="2026-11-29T04:00:00+01:00").items()
    }
    again = client.post("/", headers=lowered)
    assert again.json["outcome"] == "duplicate"
    assert probe.count == 1


@pytest.mark.both_stores
def test_same_job_in_another_project_or_location_is_another_run(client, probe):
    client.post("/", headers=scheduler_headers())
    client.post("/", headers=scheduler_headers(project="acme-staging"))
    client.post("/", headers=scheduler_headers(location="us-central1"))
    assert probe.count == 3


@pytest.mark.parametrize(
    "headers, named",
    [
        ({"X-CloudScheduler-ScheduleTime": "2026-11-29T03:00:00Z"}, "X-CloudScheduler-JobName"),
        ({"X-CloudScheduler-JobName": "nightly-report"}, "X-CloudScheduler-ScheduleTime"),
        (scheduler_headers(time="2026-11-29T03:00:00"), "X-CloudScheduler-ScheduleTime"),
        (scheduler_headers(job="j" * 501), "X-CloudScheduler-JobName"),
        ({}, "X-CloudScheduler-JobName"),
    ],
)
@pytest.mark.both_stores
def test_bad_input_answers_400_naming_the_header_and_writes_nothing(client, probe, records, headers, named):
    response = client.post("/", headers=headers)
    assert response.status_code == 400
    assert response.json["outcome"] == "rejected"
    assert response.json["error"].startswith(named)
    assert probe.count == 0
    assert records() == []


@pytest.mark.both_stores
def test_forced_run_gets_its_own_key_and_does_not_swallow_the_scheduled_run(client, probe, clock):
    # At 03:05 an operator presses "Force run"; Scheduler sends the next scheduled time, 04:00.
    clock.advance(300)
    forced = client.post("/", headers=scheduler_headers(time="2026-11-29T04:00:00Z"))
    forced_retry = client.post("/", headers=scheduler_headers(time="2026-11-29T04:00:00Z"))
    clock.advance(3300)  # 04:00:05: the real scheduled run arrives
    scheduled = client.post("/", headers=scheduler_headers(time="2026-11-29T04:00:00Z"))
    assert forced.json["outcome"] == "completed"
    assert forced_retry.json["outcome"] == "duplicate"
    assert scheduled.json["outcome"] == "completed"
    assert scheduled.json["run_key"] != forced.json["run_key"]
    assert [run.forced for run in probe.runs] == [True, False]


def test_transient_error_on_the_completion_write_is_retried_and_the_job_does_not_run_again(
    client, probe, tap, records
):
    # The job arms the faults, so they hit the completion write, not the claim.
    probe.behaviour = lambda request: tap.inject(Fault("Commit", times=2)) or "ok"
    first = client.post("/", headers=scheduler_headers())
    assert first.status_code == 200 and first.json["recorded"] is True
    assert tap.calls["Commit"] == 4  # claim + two failed completion tries + the one that landed
    again = client.post("/", headers=scheduler_headers())
    assert again.json["outcome"] == "duplicate"
    assert probe.count == 1
    assert records()[0]["status"] == "completed"


def test_completion_whose_answer_was_lost_is_recognised_as_ours(client, probe, tap, records):
    probe.behaviour = lambda request: tap.inject(Fault("Commit", after_send=True)) or "ok"
    first = client.post("/", headers=scheduler_headers())
    assert first.status_code == 200 and first.json["recorded"] is True
    assert records()[0]["status"] == "completed"
    assert probe.count == 1


def test_claim_whose_answer_was_lost_is_recognised_as_ours(client, probe, tap, records):
    tap.inject(Fault("Commit", after_send=True))  # the create lands, its answer does not
    response = client.post("/", headers=scheduler_headers())
    assert response.status_code == 200 and response.json["outcome"] == "completed"
    assert probe.count == 1
    assert records()[0]["attempts"] == 1


def test_store_down_at_claim_answers_500_not_503_and_runs_nothing(client, probe, tap):
    tap.inject(Fault("Commit", times=100))
    response = client.post("/", headers=scheduler_headers())
    assert response.status_code == 500
    assert response.json["outcome"] == "store_unavailable"
    assert probe.count == 0


@pytest.mark.both_stores
def test_misconfiguration_answers_500_naming_the_setting_and_runs_nothing(app_factory, probe):
    response = app_factory(lease=0).test_client().post("/", headers=scheduler_headers())
    assert response.status_code == 500
    assert "lease (decorator option)=0 is out of range" in response.json["error"]
    assert probe.count == 0


@pytest.mark.both_stores
def test_every_record_has_expire_at_beyond_its_lease(client, probe, records):
    probe.behaviour = lambda request: 1 / 0
    client.post("/", headers=scheduler_headers(time="2026-11-29T01:00:00Z"))
    probe.behaviour = lambda request: "ok"
    client.post("/", headers=scheduler_headers(time="2026-11-29T02:00:00Z"))
    for record in records():
        assert record["expire_at"] > record["lease_expires"]


@pytest.mark.both_stores
def test_log_lines_are_json_with_the_run_fields(client, capsys):
    import json

    client.post("/", headers=scheduler_headers())
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines() if line.startswith("{")]
    completed = [line for line in lines if line.get("outcome") == "completed"]
    assert completed, lines
    entry = completed[0]
    assert entry["severity"] == "INFO"
    assert {"message", "run_key", "job", "schedule_time", "attempt_id"} <= entry.keys()
