"""The two FastAPI apps `make bench` serves end to end, each from its own uvicorn process.

Both run the job body benchmarks.endtoend_functions runs (a small dict, no store access) in a
plain `def` route at `/`, so their latencies differ only by runonce:

- `floor`: no deduplication, the cost of uvicorn, FastAPI, HTTP and the body (FastAPI runs a
  `def` route in a worker thread);
- `deduplicated_job`: the same body under `runonce.scheduler.asgi.deduplicated` (its whole
  delivery in a worker thread, the `def` job there too).

localscheduler.hosts.uvicorn's `Uvicorn` serves them: `uvicorn MODULE:APP`, one process, its
access log off (functions-framework writes none either).
"""

from __future__ import annotations

from fastapi import FastAPI, Request

from runonce.scheduler.asgi import deduplicated


def job_body() -> dict:
    """What every variant's job does."""
    return {"published": True}


floor = FastAPI()
deduplicated_job = FastAPI()


@floor.post("/")
def floor_route(request: Request) -> dict:
    """The job body alone."""
    return job_body()


@deduplicated_job.post("/")
@deduplicated
def deduplicated_route(request: Request) -> dict:
    """The job body under runonce's ASGI `@deduplicated`."""
    return job_body()
