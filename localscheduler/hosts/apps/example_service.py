"""The example Cloud Run service, examples/service/main.py, as the local Scheduler serves it:
`uvicorn localscheduler.hosts.apps.example_service:app`.

Its own FastAPI app and `@deduplicated` job, loaded from its file as its Dockerfile serves it
(`uvicorn main:app`), with two local additions: the instance follows the local Scheduler's clock
(`job.start`), and the faults a delivery asks for (`job.Knobs`: how long the body works, a
retryable or permanent failure, the instance dying before or right after the effect) wrap the
job's own effect, `main._write_effect`, which still writes its one document named by the run key.
A middleware hands the request's headers and body to that effect through a context variable
(`asyncio.to_thread` copies it into the thread the effect runs in). Its outbox is the pool's
(SERVICES_OUTBOX_VARIABLE), given to main.py as CLOSE_OUTBOX before it loads.
"""

from __future__ import annotations

import importlib.util
import os
import sys
import time
from collections.abc import Mapping
from contextvars import ContextVar
from pathlib import Path
from typing import Any

from fastapi import Request

from runonce import current_run

from . import job

MAIN = Path(__file__).resolve().parents[3] / "examples" / "service" / "main.py"

job.start()
os.environ["CLOSE_OUTBOX"] = os.environ[job.SERVICES_OUTBOX_VARIABLE]
_spec = importlib.util.spec_from_file_location("main", MAIN)
if _spec is None or _spec.loader is None:
    raise ImportError(f"cannot load the example service from {MAIN}")
main: Any = importlib.util.module_from_spec(_spec)  # its attributes are main.py's
sys.modules["main"] = main
_spec.loader.exec_module(main)
app = main.app

_request: ContextVar[tuple[Mapping[str, str], bytes]] = ContextVar("request", default=({}, b""))
_write_effect = main._write_effect


@app.middleware("http")
async def keep_request(request: Request, call_next):
    _request.set((request.headers, await request.body()))
    return await call_next(request)


def _faulted_effect(key: str, schedule_time: str) -> bool:
    """main.py's effect, with the faults the delivery asks for around it."""
    headers, body = _request.get()
    knobs = job.Knobs.read(current_run(), headers, body)
    time.sleep(knobs.work_seconds)
    knobs.fail_if_asked()
    return job.faulted(knobs, lambda: _write_effect(key, schedule_time))


main._write_effect = _faulted_effect
