"""A Cloud Run service whose scheduled job is deduplicated: FastAPI, an `async def` job.

Cloud Scheduler calls POST /jobs/close (a `ServiceJob` with path="/jobs/close",
docs/stacks/services.md); each run closes the books once: its one effect is a document in the
`close_outbox` collection created under the run key, so an attempt that died after the effect and
before runonce recorded the completion finds it there (AlreadyExists) instead of writing a second.
Build the image with `make service-image IMAGE=...` (Dockerfile beside this file).
"""

from __future__ import annotations

import asyncio
import os

from fastapi import FastAPI, Request
from google.api_core.exceptions import AlreadyExists
from google.cloud import firestore

from runonce import current_run
from runonce.scheduler.asgi import deduplicated

OUTBOX = os.environ.get("CLOSE_OUTBOX", "close_outbox")

app = FastAPI()
_client = firestore.Client()


def _write_effect(key: str, schedule_time: str) -> bool:
    try:
        _client.collection(OUTBOX).document(key).create({"run_key": key, "schedule_time": schedule_time})
    except AlreadyExists:  # an earlier attempt of this run wrote it before it died
        return False
    return True


@app.post("/jobs/close")
@deduplicated
async def close(request: Request) -> dict[str, object]:
    run = current_run()
    written = await asyncio.to_thread(_write_effect, run.key, getattr(run, "schedule_time", ""))
    return {"closed": run.key, "written": written}
