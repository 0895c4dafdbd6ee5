"""The two FastAPI apps `make bench` serves end to end, each from its own uvicorn process.

Both run the job body benchmarks.endtoend_functions runs (a small dict, no store access) in a
plain `def` route at `/`, so their latencies differ only by runonce:

- `floor`: no deduplication, the cost of uvicorn, FastAPI, HTTP and the body (FastAPI runs a
  `def` route in a worker thread);
- `deduplicated_job`: the same body under `runonce.scheduler.asgi.deduplicated` (its whole
  delivery in a worker thread, the `def` job there too).

`Uvicorn` is the `localscheduler.hosts.pool.Host` that serves them: `uvicorn MODULE:APP`, one
process, its access log off (functions-framework writes none either).
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path

from fastapi import FastAPI, Request

from runonce.scheduler.asgi import deduplicated
from stacks.team import REPO_ROOT


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


@dataclass(frozen=True)
class Uvicorn:
    """A `localscheduler.hosts.pool.Host` running uvicorn on an ASGI app of a repository module."""

    def command(self, source: Path, target: str, port: int) -> list[str]:
        """uvicorn serving the app `target` of the module at `source` on 127.0.0.1:`port`."""
        module = ".".join(source.resolve().relative_to(REPO_ROOT).with_suffix("").parts)
        return [
            sys.executable,
            "-m",
            "uvicorn",
            f"{module}:{target}",
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--no-access-log",
        ]

    def environment(self, source: Path, target: str) -> dict[str, str]:
        """Nothing beyond the pool's environment."""
        return {}
