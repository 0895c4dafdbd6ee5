"""`runonce.scheduler.asgi` makes no store call on the event loop, for `async def` and `def` jobs
alike: checked on the in-memory store, whose calls are watched."""

from __future__ import annotations

import asyncio

import pytest

from runonce.scheduler import asgi
from tests.core.conftest import scheduler_headers

from .test_asgi import fastapi_app, post_all


@pytest.fixture
def store_kind() -> str:
    """The in-memory store: its calls are the ones watched."""
    return "memory"


@pytest.mark.fast
@pytest.mark.parametrize("awaited", [True, False], ids=["async def", "def"])
def test_no_store_call_is_made_on_the_event_loop(serving_client, memory_store, collection, clock, awaited):
    """Every store call of a delivery (claim, complete) finds no running event loop in its thread."""
    on_loop: list[bool] = []

    def watched(call):
        def wrapper(*arguments, **keywords):
            try:
                asyncio.get_running_loop()
                on_loop.append(True)
            except RuntimeError:
                on_loop.append(False)
            return call(*arguments, **keywords)

        return wrapper

    for name in ("claim", "complete"):
        setattr(memory_store, name, watched(getattr(memory_store, name)))

    async def awaited_job(request):
        return "done"

    job = awaited_job if awaited else (lambda request: "done")
    endpoint = asgi.deduplicated(collection=collection, client=serving_client, lease=120)(job)
    [answer] = post_all(fastapi_app(endpoint), [scheduler_headers()])
    assert answer.json()["outcome"] == "completed"
    assert on_loop == [False, False]
