"""The FastAPI service, `async def` jobs: `uvicorn localscheduler.hosts.apps.fastapi_app:app`.
The scheduled job awaits its work on the event loop and writes its effect off the loop (a
thread); the event job (Pub/Sub push) runs in the thread runonce runs it in."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from contextvars import ContextVar

from fastapi import FastAPI, Request

from runonce import current_run
from runonce.events.asgi import deduplicated_event
from runonce.scheduler.asgi import deduplicated

from . import job

job.start()

app = FastAPI()
HOST = "uvicorn-fastapi"
# The request's headers, for the event job (it receives the event alone): a fault names its run there.
_headers: ContextVar[Mapping[str, str] | None] = ContextVar("headers", default=None)


@app.middleware("http")
async def keep_headers(request: Request, call_next):
    _headers.set(request.headers)
    return await call_next(request)


@app.post("/jobs/close")
@deduplicated
async def close(request: Request):
    run = current_run()
    knobs = job.Knobs.read(run, request.headers, await request.body())
    await asyncio.sleep(knobs.work_seconds)
    knobs.fail_if_asked()
    return await asyncio.to_thread(job.effect, run, knobs, HOST)


@app.post("/events/orders")
@deduplicated_event
async def orders(event):
    return await asyncio.to_thread(job.order, current_run(), event, _headers.get() or {}, HOST)
