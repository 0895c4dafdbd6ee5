"""The scheduled path's decisions on every host (tests/hosts/conftest.py: functions-framework, a
Flask view, a Django view, Starlette and FastAPI with `def` and `async def` jobs): the same
answers, records and runs as functions-framework's, through each framework's own test client."""

from __future__ import annotations

import threading
import time

import pytest

from runonce.core.errors import OutcomeUnknown, PermanentError
from tests.core.conftest import scheduler_headers

pytestmark = pytest.mark.both_stores


def test_the_first_delivery_runs_the_job_and_answers_completed_with_its_result(serve, probe, records):
    status, body = serve().post(scheduler_headers())
    assert (status, body["outcome"], body["result"]) == (200, "completed", {"rows": 42})
    assert probe.count == 1 and probe.runs[0].job == "nightly-report"
    assert [record["status"] for record in records()] == ["completed"]


def test_a_duplicate_is_answered_the_stored_result_without_running(serve, probe):
    client = serve()
    client.post(scheduler_headers())
    status, body = client.post(scheduler_headers())
    assert (status, body["outcome"], body["status"], body["result"]) == (
        200,
        "duplicate",
        "completed",
        {"rows": 42},
    )
    assert probe.count == 1


def test_header_names_in_any_case_are_one_run(serve, probe):
    client = serve()
    client.post({name.lower(): value for name, value in scheduler_headers().items()})
    status, body = client.post({name.upper(): value for name, value in scheduler_headers().items()})
    assert (status, body["outcome"]) == (200, "duplicate")
    assert probe.count == 1


def test_a_retryable_failure_answers_500_and_the_retry_runs_the_job(serve, probe):
    client = serve()
    probe.behaviour = lambda: 1 / 0
    status, body = client.post(scheduler_headers())
    assert (status, body["outcome"], body["error"]) == (500, "retry", "ZeroDivisionError")
    probe.behaviour = lambda: "fixed"
    status, body = client.post(scheduler_headers())
    assert (status, body["outcome"], body["result"]) == (200, "completed", "fixed")
    assert probe.count == 2


def _permanent():
    raise PermanentError("the account is closed")


def test_a_permanent_failure_answers_200_failed_and_never_runs_again(serve, probe, records):
    client = serve()
    probe.behaviour = _permanent
    status, body = client.post(scheduler_headers())
    assert (status, body["outcome"], body["error"]) == (200, "failed", "the account is closed")
    status, body = client.post(scheduler_headers())
    assert (status, body["outcome"], body["status"]) == (200, "duplicate", "failed")
    assert probe.count == 1
    assert [record["status"] for record in records()] == ["failed"]


@pytest.mark.parametrize(
    ("returned", "outcome", "status"),
    [(({"x": 1}, 201), "completed", 200), (("gone", 404), "failed", 200), (("busy", 503), "retry", 500)],
)
def test_a_returned_status_decides_the_run_as_on_functions_framework(serve, probe, returned, outcome, status):
    probe.behaviour = lambda: returned
    answered, body = serve().post(scheduler_headers())
    assert (answered, body["outcome"]) == (status, outcome)


def test_a_response_of_the_jobs_own_framework_is_read_for_its_status_and_json(serve, probe, host):
    probe.behaviour = lambda: FRAMEWORK_RESPONSES[host]({"closed": 3}, 201)
    status, body = serve().post(scheduler_headers())
    assert (status, body["outcome"], body["result"]) == (200, "completed", {"closed": 3})
    probe.behaviour = lambda: FRAMEWORK_RESPONSES[host]({"why": "closed"}, 410)
    status, body = serve().post(scheduler_headers(time="2026-11-29T02:00:00Z"))
    assert (status, body["outcome"]) == (200, "failed")
    assert '"why": "closed"' in body["error"]


def _werkzeug(data, status):
    import flask

    return flask.Response(flask.json.dumps(data), status=status, mimetype="application/json")


def _django_response(data, status):
    from django.http import JsonResponse

    return JsonResponse(data, status=status)


def _starlette_response(data, status):
    from starlette.responses import JSONResponse

    return JSONResponse(data, status_code=status)


FRAMEWORK_RESPONSES = {
    "functions-framework": _werkzeug,
    "flask-view": _werkzeug,
    "django": _django_response,
    "starlette-def": _starlette_response,
    "starlette-async": _starlette_response,
    "fastapi-def": _starlette_response,
    "fastapi-async": _starlette_response,
}


@pytest.mark.parametrize(
    ("missing", "header"),
    [
        ("X-CloudScheduler-JobName", "X-CloudScheduler-JobName"),
        ("X-CloudScheduler-ScheduleTime", "X-CloudScheduler-ScheduleTime"),
    ],
)
def test_a_request_without_a_scheduler_header_answers_400_naming_it(serve, probe, records, missing, header):
    headers = {name: value for name, value in scheduler_headers().items() if name != missing}
    status, body = serve().post(headers)
    assert (status, body["outcome"]) == (400, "rejected")
    assert header in body["error"]
    assert probe.count == 0 and records() == []


def test_a_delivery_while_the_run_is_in_progress_answers_409(serve, probe):
    client = serve()
    started, release = threading.Event(), threading.Event()

    def slow():
        started.set()
        release.wait(10)
        return "done"

    probe.behaviour = slow
    first = threading.Thread(target=client.post, args=(scheduler_headers(),))
    first.start()
    assert started.wait(10)
    status, body = client.post(scheduler_headers())
    release.set()
    first.join(10)
    assert (status, body["outcome"]) == (409, "in_progress")
    assert probe.count == 1


def _unknown():
    raise OutcomeUnknown("the charge may have gone through", hold_seconds=30)


def test_an_unknown_outcome_holds_the_run_and_answers_409(serve, probe):
    probe.behaviour = _unknown
    status, body = serve().post(scheduler_headers())
    assert (status, body["outcome"], body["held_seconds"]) == (409, "in_progress", 30)


def test_a_forced_run_does_not_swallow_the_scheduled_run(serve, probe, clock):
    client = serve()
    status, body = client.post(scheduler_headers(time="2026-11-29T04:00:00Z"))  # ahead: forced
    assert (status, body["outcome"]) == (200, "completed")
    assert probe.runs[0].forced
    clock.advance(3600)
    status, body = client.post(scheduler_headers(time="2026-11-29T04:00:00Z"))
    assert (status, body["outcome"]) == (200, "completed")
    assert not probe.runs[1].forced and probe.count == 2


def test_a_delivery_older_than_the_retention_answers_too_old(serve, probe, clock):
    clock.advance(8 * 24 * 3600)
    status, body = serve().post(scheduler_headers())
    assert (status, body["outcome"]) == (200, "too_old")
    assert probe.count == 0


def test_a_misconfiguration_answers_500_naming_the_setting(serve, probe):
    status, body = serve(lease=0).post(scheduler_headers())
    assert (status, body["outcome"]) == (500, "misconfigured")
    assert "lease (decorator option)=0 is out of range" in body["error"]
    assert probe.count == 0


def test_the_answering_log_line_is_the_same_on_every_host(serve, log_lines):
    serve().post(scheduler_headers())
    answered = [fields for _, fields in log_lines() if "latency_ms" in fields]
    assert [(fields["message"], fields["outcome"], fields["job"]) for fields in answered] == [
        ("run completed", "completed", "nightly-report")
    ]


def test_the_job_runs_once_among_many_simultaneous_deliveries(serve, probe):
    client = serve()
    probe.behaviour = lambda: time.sleep(0.2) or "once"
    answers: list[tuple[int, dict]] = []
    threads = [
        threading.Thread(target=lambda: answers.append(client.post(scheduler_headers()))) for _ in range(6)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(20)
    assert probe.count == 1
    assert sorted(body["outcome"] for _, body in answers).count("completed") == 1
    assert all(status in (200, 409) for status, _ in answers)


def test_an_unforeseen_failure_before_the_claim_is_answered_500_error_as_json(serve, probe, monkeypatch):
    def broken(delivery):
        raise RuntimeError("a bug")

    monkeypatch.setattr("runonce.scheduler.adapter.run_key", broken)
    status, body = serve().post(scheduler_headers())
    assert (status, body) == (500, {"outcome": "error", "error": "RuntimeError"})
    assert probe.count == 0


def test_a_failure_after_the_job_succeeded_still_answers_completed(serve, probe, monkeypatch, records):
    from runonce.core import handler

    line = handler._body_line

    def failing_after_the_body(stage, end=None, exc=None):
        if end is not None:
            raise RuntimeError("the log line failed")
        line(stage, end, exc)

    monkeypatch.setattr(handler, "_body_line", failing_after_the_body)
    status, body = serve().post(scheduler_headers())
    assert (status, body["outcome"], body["result_stored"]) == (200, "completed", False)
    assert [record["status"] for record in records()] == ["completed"]


def test_the_trace_header_is_read_in_any_case(serve, log_lines):
    trace = "0af7651916cd43dd8448eb211c80319c"
    serve().post({**scheduler_headers(), "TRACEPARENT": f"00-{trace}-b7ad6b7169203331-01"})
    answered = [fields for _, fields in log_lines() if "latency_ms" in fields]
    assert answered[0]["logging.googleapis.com/trace"].endswith(f"/traces/{trace}")
