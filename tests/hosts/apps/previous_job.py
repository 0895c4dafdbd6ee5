"""An incremental job served by functions-framework instances (localscheduler's pool) in
tests/operate/test_previous_black_box.py: it reads `current_run().previous`, notes what it read in
the file $PREVIOUS_TEST_NOTES (one JSON line per event), holds for `X-Test-Hold` seconds, and
returns its cursor with an id of this execution, so a test can tell which execution's result a
later run read.

`X-Test-Die-After-Effect: RUN_KEY` kills the instance right after that run's first attempt noted
its effect (before the completion is written); `X-Test-Short-Lease: 1` runs the job under a
lease of SHORT_LEASE seconds, so a takeover of a killed attempt comes quickly.
"""

from __future__ import annotations

import json
import os
import signal
import time
import uuid

import functions_framework

from runonce import current_run, deduplicated

LEASE, SHORT_LEASE = 30, 3


def _note(event: str, **fields: object) -> None:
    """One line, appended in one write (O_APPEND keeps the instances' lines whole)."""
    line = json.dumps({"event": event, "pid": os.getpid(), "at": time.monotonic(), **fields}) + "\n"
    with open(os.environ["PREVIOUS_TEST_NOTES"], "a") as notes:
        notes.write(line)


def _body(request):
    run = current_run()
    previous = run.previous
    execution = uuid.uuid4().hex
    _note(
        "started",
        run=run.key,
        schedule_time=run.schedule_time,
        attempt=run.attempt,
        execution=execution,
        previous=None if previous is None else previous.key,
        previous_time=None if previous is None else previous.schedule_time,
        previous_result=None if previous is None else previous.result,
    )
    time.sleep(float(request.headers.get("X-Test-Hold", "0")))
    _note("effect", run=run.key, execution=execution)
    if request.headers.get("X-Test-Die-After-Effect") == run.key and run.attempt == 1:
        os.killpg(os.getpgrp(), signal.SIGKILL)
    return {"until": run.schedule_time, "execution": execution}


_held = deduplicated(lease=LEASE)(_body)
_short = deduplicated(lease=SHORT_LEASE)(_body)


@functions_framework.http
def handle(request):
    """The job under @deduplicated, with the lease the request asks for."""
    return (_short if request.headers.get("X-Test-Short-Lease") else _held)(request)
