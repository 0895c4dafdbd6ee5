"""The FastAPI service, an `async def` job: `uvicorn localscheduler.hosts.apps.fastapi_app:app`.
It awaits its work on the event loop and writes its effect off the loop (a thread)."""

from __future__ import annotations

import asyncio

from fastapi import FastAPI, Request

from runonce import current_run
from runonce.scheduler.asgi import deduplicated

from . import job

job.warm_up()

app = FastAPI()


@app.post("/jobs/close")
@deduplicated
async def close(request: Request):
    run = current_run()
    await asyncio.sleep(job.work_seconds(request.headers))
    return await asyncio.to_thread(job.effect, run, request.headers, "uvicorn-fastapi")
