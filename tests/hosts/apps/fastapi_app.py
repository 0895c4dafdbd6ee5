"""A FastAPI app with an `async def` job and a `def` job: `uvicorn tests.hosts.apps.fastapi_app:app`."""

from __future__ import annotations

import asyncio

from fastapi import FastAPI, Request

from runonce.scheduler.asgi import deduplicated

from . import job

app = FastAPI()


@app.post("/jobs/close")
@deduplicated
async def close(request: Request):
    await asyncio.sleep(job.before(request.headers))
    return job.effect(request.headers)


@app.post("/jobs/close-sync")
@deduplicated
def close_sync(request: Request):
    return job.body(request.headers)
