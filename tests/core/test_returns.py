"""Defect classes 3 and 4: jobs whose body would never run (async, generators), jobs that return
what cannot be stored (their body ran: completed without the result), and jobs that return an
error status instead of raising."""

from __future__ import annotations

import asyncio
import warnings

import flask
import pytest

import runonce
from runonce.core.errors import NotRunnable

from .conftest import scheduler_headers


async def _async_job(request):
    return "never runs"


def _generator_job(request):
    yield "never runs"


async def _async_generator_job(request):
    yield "never runs"


class _AsyncCallable:
    async def __call__(self, request):
        return "never runs"


@pytest.mark.parametrize(
    "job, named",
    [
        (_async_job, "async function"),
        (_generator_job, "generator function"),
        (_async_generator_job, "async function"),
        (_AsyncCallable(), "async function"),
    ],
    ids=["async def", "generator", "async generator", "object with async __call__"],
)
def test_a_job_whose_body_would_never_run_is_refused_when_decorated(tapped_client, job, named):
    with pytest.raises(NotRunnable, match=named):
        runonce.deduplicated(client=tapped_client)(job)
    with pytest.raises(TypeError):  # NotRunnable is a TypeError, so plain handlers catch it too
        runonce.deduplicated(job)


class _Awaitable:
    def __await__(self):
        yield


class _Unreadable:
    """An object whose class cannot even be asked for: every isinstance check on it raises."""

    @property
    def __class__(self):
        raise RuntimeError("no class for you")


@pytest.mark.parametrize(
    "returned, named",
    [
        (lambda: _async_job(None), "coroutine"),
        (lambda: _generator_job(None), "generator"),
        (lambda: _async_generator_job(None), "async_generator"),
        (lambda: asyncio.sleep(0), "coroutine"),
        (lambda: _Awaitable(), "_Awaitable"),
        (lambda: (_async_job(None), 200), "coroutine"),
        (lambda: _Unreadable(), "RuntimeError"),
        (lambda: object(), "object"),
    ],
    ids=[
        "coroutine",
        "generator",
        "async generator",
        "awaitable",
        "object with __await__",
        "coroutine with a 200",
        "object whose class raises",
        "plain object",
    ],
)
@pytest.mark.both_stores
def test_a_job_that_returned_something_unstorable_is_completed_without_its_result_and_never_run_again(
    client, probe, clock, records, returned, named
):
    probe.behaviour = lambda request: returned()
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)  # "coroutine ... was never awaited"
        response = client.post("/", headers=scheduler_headers())
    assert response.status_code == 200 and response.json["outcome"] == "completed"
    assert response.json["result"] is None and response.json["result_stored"] is False
    assert named in response.json["result_dropped"]
    [record] = records()
    assert record["status"] == "completed" and record["result_stored"] is False
    clock.advance(121)  # past the lease: a released or unfinished run would be claimed and run again
    again = client.post("/", headers=scheduler_headers())
    assert again.json["outcome"] == "duplicate" and again.json["result_stored"] is False
    assert probe.count == 1


@pytest.mark.parametrize(
    "returned",
    [
        lambda: ("upstream down", 503),
        lambda: ("upstream down", 500, {"Retry-After": "10"}),
        lambda: ({"error": "busy"}, "502 BAD GATEWAY"),
        lambda: flask.Response("down", status=504),
        lambda: ("slow down", 429),
        lambda: ("timed out", 408),
    ],
    ids=["tuple 503", "tuple with headers", "status text", "Response 504", "429", "408"],
)
@pytest.mark.both_stores
def test_a_returned_5xx_is_a_retryable_failure_released_and_retried(client, probe, records, returned):
    probe.behaviour = lambda request: returned()
    first = client.post("/", headers=scheduler_headers())
    assert first.status_code == 500 and first.json["outcome"] == "retry"
    assert first.json["error"].startswith("the job returned HTTP ")
    assert records() == []
    probe.behaviour = lambda request: "ok"
    retry = client.post("/", headers=scheduler_headers())
    assert retry.json["outcome"] == "completed"
    assert probe.count == 2


@pytest.mark.parametrize(
    "returned",
    [lambda: ("no such report", 404), lambda: flask.Response("bad input", status=400)],
    ids=["tuple 404", "Response 400"],
)
@pytest.mark.both_stores
def test_a_returned_4xx_is_a_permanent_failure_recorded_and_never_run_again(client, probe, records, returned):
    probe.behaviour = lambda request: returned()
    first = client.post("/", headers=scheduler_headers())
    assert first.status_code == 200 and first.json["outcome"] == "failed"
    assert first.json["error"].startswith("the job returned HTTP 4")
    [record] = records()
    assert record["status"] == "failed" and record["error"] == first.json["error"]
    again = client.post("/", headers=scheduler_headers())
    assert again.json["outcome"] == "duplicate" and again.json["error"] == first.json["error"]
    assert probe.count == 1


@pytest.mark.parametrize(
    "returned, result",
    [
        (lambda: ("created", 201), "created"),
        (lambda: ({"rows": 3}, 200, {"X-Extra": "1"}), {"rows": 3}),
        (lambda: flask.jsonify(rows=3), {"rows": 3}),
        (lambda: flask.Response("plain text", status=202), "plain text"),
        (lambda: ("processed", 17), ["processed", 17]),  # 17 is no status: the tuple is data
    ],
    ids=["tuple 201", "tuple with headers", "jsonify", "Response 202", "data tuple"],
)
@pytest.mark.both_stores
def test_a_returned_success_status_completes_with_the_body_as_result(client, probe, returned, result):
    with flask.Flask(__name__).app_context():
        value = returned()
    probe.behaviour = lambda request: value
    response = client.post("/", headers=scheduler_headers())
    assert response.status_code == 200 and response.json["outcome"] == "completed"
    assert response.json["result"] == result
