"""FastAPI and Starlette (`runonce.scheduler.asgi`): `async def` jobs awaited on the event loop,
`def` jobs in the worker threads where Starlette runs sync code, and no store call on the loop, so
the loop serves other deliveries while a job awaits. Driven on one event loop through httpx's
ASGI transport (the test client of tests/hosts/conftest.py starts a loop per request)."""

from __future__ import annotations

import asyncio
import inspect
import threading

import httpx
import pytest
from fastapi import FastAPI, Request
from starlette.applications import Starlette
from starlette.routing import Route

from runonce.core.errors import NotRunnable
from runonce.scheduler import asgi
from tests.core.conftest import scheduler_headers

pytestmark = pytest.mark.both_stores


def post_all(app, deliveries: list[dict[str, str]]) -> list[httpx.Response]:
    """Post every delivery at once to `app` on one event loop; the answers in order."""

    async def main() -> list[httpx.Response]:
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://runonce.test") as client:
            posts = [client.post("/jobs/close", headers=headers) for headers in deliveries]
            return await asyncio.wait_for(asyncio.gather(*posts), 30)

    return asyncio.run(main())


def fastapi_app(endpoint) -> FastAPI:
    app = FastAPI()
    app.post("/jobs/close")(endpoint)
    return app


def test_another_run_is_served_while_a_job_awaits(serving_client, collection, clock):
    """The first run's job awaits an event only the second run's job sets: both complete only if
    the loop serves the second delivery while the first job awaits (and no store call blocks it)."""
    second_ran = asyncio.Event()

    @asgi.deduplicated(collection=collection, client=serving_client, lease=120)
    async def close(request: Request):
        if request.headers["X-CloudScheduler-JobName"] == "first":
            await asyncio.wait_for(second_ran.wait(), 10)
            return "first"
        second_ran.set()
        return "second"

    first, second = post_all(
        fastapi_app(close), [scheduler_headers(job="first"), scheduler_headers(job="second")]
    )
    assert [first.json()["result"], second.json()["result"]] == ["first", "second"]


def test_simultaneous_deliveries_of_one_run_give_exactly_one_body(serving_client, collection, clock):
    ran: list[str] = []

    @asgi.deduplicated(collection=collection, client=serving_client, lease=120)
    async def close(request: Request):
        ran.append("body")
        await asyncio.sleep(0.2)
        return "once"

    answers = post_all(fastapi_app(close), [scheduler_headers()] * 8)
    outcomes = sorted(answer.json()["outcome"] for answer in answers)
    assert ran == ["body"] and outcomes.count("completed") == 1, outcomes
    assert set(outcomes) <= {"completed", "in_progress", "duplicate"}


def test_an_async_job_runs_on_the_loop_and_a_def_job_in_a_worker_thread(serving_client, collection, clock):
    threads: dict[str, threading.Thread] = {}

    async def awaited(request):
        threads["async"] = threading.current_thread()
        return "async"

    def plain(request):
        threads["def"] = threading.current_thread()
        return "def"

    options = {"collection": collection, "client": serving_client, "lease": 120}
    routes = [
        Route("/jobs/close", asgi.deduplicated(**options)(awaited), methods=["POST"]),
        Route("/jobs/plain", asgi.deduplicated(**options)(plain), methods=["POST"]),
    ]

    async def main() -> None:
        transport = httpx.ASGITransport(app=Starlette(routes=routes))
        async with httpx.AsyncClient(transport=transport, base_url="http://runonce.test") as client:
            threads["loop"] = threading.current_thread()
            assert (await client.post("/jobs/close", headers=scheduler_headers(job="a"))).status_code == 200
            assert (await client.post("/jobs/plain", headers=scheduler_headers(job="b"))).status_code == 200

    asyncio.run(main())
    assert threads["async"] is threads["loop"]
    assert threads["def"] is not threads["loop"]


@pytest.mark.fast
def test_fastapi_sees_one_parameter_the_request_and_no_query_parameter():
    async def close(request):
        return {}

    endpoint = asgi.deduplicated(close)
    assert list(inspect.signature(endpoint).parameters.items()) == [
        ("request", inspect.Parameter("request", inspect.Parameter.POSITIONAL_OR_KEYWORD, annotation=Request))
    ]
    operation = fastapi_app(endpoint).openapi()["paths"]["/jobs/close"]["post"]
    assert "parameters" not in operation and "requestBody" not in operation


@pytest.mark.fast
def test_a_generator_job_is_refused_when_decorated():
    async def streamed(request):
        yield "never runs"

    def generated(request):
        yield "never runs"

    for job in (streamed, generated):
        with pytest.raises(NotRunnable, match="generator"):
            asgi.deduplicated(job)


@pytest.mark.fast
def test_functions_framework_still_refuses_an_async_job_and_names_the_asgi_decorator():
    import runonce

    async def close(request):
        return {}

    with pytest.raises(NotRunnable, match=r"runonce\.scheduler\.asgi\.deduplicated"):
        runonce.deduplicated(close)


def test_the_sync_decorator_on_a_starlette_route_answers_a_json_response(serving_client, collection, clock):
    """A plain `def` route under `runonce.deduplicated`: Starlette runs it in its thread pool,
    the request is Starlette's, the answer a JSONResponse."""
    import runonce

    @runonce.deduplicated(collection=collection, client=serving_client, lease=120)
    def close(request):
        return {"path": request.url.path}

    app = Starlette(routes=[Route("/jobs/close", close, methods=["POST"])])
    first, again = post_all(app, [scheduler_headers()]) + post_all(app, [scheduler_headers()])
    assert (first.status_code, first.json()["result"]) == (200, {"path": "/jobs/close"})
    assert again.json()["outcome"] == "duplicate"
