"""Defect class 8: log lines. Every line about a run names it, a failed write is named for what it
was, lines carry the request's trace, and no line or answer exceeds Cloud Logging's 256 KB."""

from __future__ import annotations

import json
import logging
from datetime import datetime

import grpc
import pytest

from emulator.wire import Fault
from runonce import PermanentError
from runonce._text import MAX_ERROR_CHARS

from .conftest import scheduler_headers

LIMIT = 256 * 1024
TRACE = "logging.googleapis.com/trace"
SPAN = "logging.googleapis.com/spanId"


def _about_the_run(lines) -> list[dict]:
    return [line for _, line in lines if line.get("outcome") != "rejected"]


def test_every_line_about_a_run_names_its_run_key_and_job(client, probe, tap, log_lines):
    probe.behaviour = lambda request: tap.inject(Fault("Commit", code=grpc.StatusCode.INVALID_ARGUMENT)) or 1
    response = client.post("/", headers=scheduler_headers())
    lines = _about_the_run(log_lines())
    assert lines
    for line in lines:
        assert (line["run_key"], line["job"]) == (response.json["run_key"], "nightly-report"), line


def test_a_rejected_completion_write_is_not_called_store_unavailable(client, probe, tap, log_lines):
    def job(request):
        tap.inject(Fault("Commit", code=grpc.StatusCode.INVALID_ARGUMENT, times=2))
        return "ok"

    probe.behaviour = job
    response = client.post("/", headers=scheduler_headers())
    assert response.json["outcome"] == "completed" and response.json["recorded"] is False
    [line] = [line for _, line in log_lines() if line.get("recorded") is False]
    assert "the completion write failed: the store rejected it (InvalidArgument" in line["message"]
    assert "unavailable" not in line["message"]
    assert line["outcome"] == "completed" and line["run_key"] == response.json["run_key"]


def test_a_completion_the_store_refuses_once_is_recorded_without_its_result(
    client, probe, tap, records, clock
):
    probe.behaviour = lambda request: tap.inject(Fault("Commit", code=grpc.StatusCode.INVALID_ARGUMENT)) or 1
    first = client.post("/", headers=scheduler_headers())
    assert first.json["recorded"] is True and first.json["result_stored"] is False
    assert first.json["result_dropped"].startswith("the store refused it")
    [record] = records()
    assert record["status"] == "completed" and record["result_dropped"] == first.json["result_dropped"]
    clock.advance(121)
    again = client.post("/", headers=scheduler_headers())
    assert again.json["outcome"] == "duplicate"
    assert again.json["result_dropped"] == first.json["result_dropped"]
    assert probe.count == 1


@pytest.mark.parametrize(
    "header, value, span",
    [
        ("X-Cloud-Trace-Context", "105445aa7843bc8bf206b12000100000/1;o=1", "0000000000000001"),
        ("x-cloud-trace-context", "105445AA7843BC8BF206B12000100000", None),
        ("traceparent", "00-105445aa7843bc8bf206b12000100000-b7ad6b7169203331-01", "b7ad6b7169203331"),
    ],
    ids=["cloud trace with span", "cloud trace, no span", "traceparent"],
)
@pytest.mark.both_stores
def test_every_line_of_a_traced_request_carries_the_trace(client, probe, log_lines, header, value, span):
    probe.behaviour = lambda request: 1 / 0  # the body's start and end, the retry, the rejection
    client.post("/", headers={**scheduler_headers(), header: value})
    client.post("/", headers={**scheduler_headers(time="bad"), header: value})
    lines = [line for _, line in log_lines()]
    assert len(lines) == 4
    for line in lines:
        assert line[TRACE] == "projects/runonce-local/traces/105445aa7843bc8bf206b12000100000"
        assert line.get(SPAN) == span


@pytest.mark.both_stores
def test_a_request_without_a_trace_logs_no_trace_fields(client, log_lines):
    client.post(
        "/", headers={**scheduler_headers(), "traceparent": "00-" + "0" * 32 + "-" + "1" * 16 + "-01"}
    )
    assert all(TRACE not in line for _, line in log_lines())


@pytest.mark.both_stores
def test_a_huge_permanent_error_is_cut_alike_in_the_log_the_answer_and_the_record(
    client, probe, records, log_lines
):
    def job(request):
        raise PermanentError("x" * 2_000_000)

    probe.behaviour = job
    first = client.post("/", headers=scheduler_headers())
    again = client.post("/", headers=scheduler_headers())
    assert len(first.data) < LIMIT and len(again.data) < LIMIT
    assert len(first.json["error"]) <= MAX_ERROR_CHARS and "more characters cut" in first.json["error"]
    assert records()[0]["error"] == first.json["error"] == again.json["error"]
    for raw, _ in log_lines():
        assert len(raw.encode()) < LIMIT


@pytest.mark.both_stores
def test_a_huge_retried_error_and_its_stack_trace_stay_under_the_entry_limit(client, probe, log_lines):
    def job(request):
        raise RuntimeError("\u00e9" * 1_000_000)  # escaped in JSON: 6 bytes a character

    probe.behaviour = job
    response = client.post("/", headers=scheduler_headers())
    assert response.json["outcome"] == "retry" and len(response.data) < LIMIT
    [(raw, line)] = [entry for entry in log_lines() if entry[1].get("outcome") == "retry"]
    assert len(raw.encode()) < LIMIT
    assert "stack_trace" in line and line["run_key"] == response.json["run_key"]


@pytest.mark.both_stores
def test_log_lines_are_one_json_object_each(client, log_lines):
    client.post("/", headers=scheduler_headers())
    for raw, line in log_lines():
        assert "\n" not in raw and json.loads(raw) == line


def _body_lines(log_lines) -> list[dict]:
    return [line for _, line in log_lines() if "runonce_body" in line]


@pytest.mark.both_stores
def test_a_job_body_is_logged_when_it_starts_and_when_it_ends(client, probe, log_lines):
    probe.behaviour = lambda request: "ok"
    response = client.post("/", headers=scheduler_headers())
    started, ended = _body_lines(log_lines)
    assert (started["runonce_body"], ended["runonce_body"], ended["runonce_body_end"]) == (
        "started",
        "ended",
        "succeeded",
    )
    for line in (started, ended):
        assert (line["run_key"], line["attempt"]) == (response.json["run_key"], 1)
        assert line["attempt_id"] == started["attempt_id"]
        assert datetime.fromisoformat(line["time"]).tzinfo is not None
    assert ended["time"] >= started["time"]


@pytest.mark.parametrize(
    "behaviour, end, error",
    [
        (lambda request: 1 / 0, "retryable", "ZeroDivisionError"),
        (lambda request: ("busy", 503), "retryable", None),
        (lambda request: _raise(PermanentError("no such account")), "permanent", "PermanentError"),
        (lambda request: ("bad request", 400), "permanent", None),
    ],
    ids=["raised", "returned 503", "raised PermanentError", "returned 400"],
)
@pytest.mark.both_stores
def test_a_body_end_line_says_how_the_core_read_the_ending(client, probe, log_lines, behaviour, end, error):
    probe.behaviour = behaviour
    client.post("/", headers=scheduler_headers())
    [_, ended] = _body_lines(log_lines)
    assert (ended["runonce_body_end"], ended.get("error")) == (end, error)


@pytest.mark.both_stores
def test_no_body_line_is_written_for_a_duplicate(client, probe, log_lines):
    probe.behaviour = lambda request: "ok"
    client.post("/", headers=scheduler_headers())
    log_lines()
    assert client.post("/", headers=scheduler_headers()).json["outcome"] == "duplicate"
    assert _body_lines(log_lines) == []


def _raise(exc: Exception):
    raise exc


class _DropBodyStarted(logging.Filter):
    def __init__(self):
        super().__init__()
        self.seen: list[str] = []

    def filter(self, record: logging.LogRecord) -> bool:
        self.seen.append(record.getMessage())
        return record.getMessage() != "job body started"


@pytest.mark.fast
def test_a_filter_on_runonce_s_logger_sees_every_line_and_may_drop_it(log_lines):
    """Lines go through the logger's level, filters and handlers (the local scheduler's kill fault
    is such a filter), with their fields on the record."""
    from runonce import _logs

    dropper = _DropBodyStarted()
    _logs.logger.addFilter(dropper)
    try:
        _logs.log(logging.INFO, "job body started", runonce_body="started")
        _logs.log(logging.INFO, "run completed", outcome="completed")
        _logs.log(logging.DEBUG, "below the logger's level")
    finally:
        _logs.logger.removeFilter(dropper)
    assert dropper.seen == ["job body started", "run completed"]
    assert [(line["message"], line.get("outcome")) for _, line in log_lines()] == [
        ("run completed", "completed")
    ]
