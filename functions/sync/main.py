"""Example incremental job: copy what changed since the previous run, exactly once per window.

Each run covers the window [the previous completed run's `until`, this run's schedule time): its
start is the cursor the run before returned (`runonce.current_run().previous`, docs/library.md "The
previous run"), or `SYNC_START` on the job's first run. The run's effect is one outbox document
named by its window, created with `create()`: an attempt that takes over a run whose instance died
after its effect reads the same previous, so it meets the same window and finds it done. The run
returns `{"until": ...}`, the cursor its next run starts from, kept in the same fenced write that
completes the run.

The job's overlap policy must be `wait` or `skip` (teams/example.py): under `allow`, two runs in
flight together may read the same previous and copy overlapping windows.

The request body may carry the knobs the local demo's faults use, as functions/report reads them:
`work_seconds`, `fail` (`"retryable"` or `"permanent"`) and `kill_after_effect`.
"""

import json
import os
import signal
import time

import functions_framework
from google.api_core.exceptions import AlreadyExists
from google.cloud import firestore

from runonce import PermanentError, Run, current_run, deduplicated

OUTBOX = os.environ.get("SYNC_OUTBOX_COLLECTION", "sync_outbox")
START = os.environ.get("SYNC_START", "1970-01-01T00:00:00Z")
"""Where the job's first window starts (RFC 3339), when no run of it has completed yet."""
_db = None


def _client() -> firestore.Client:
    global _db
    if _db is None:
        _db = firestore.Client(database=os.environ.get("RUNONCE_DATABASE", "(default)"))
    return _db


def since(run: Run) -> str:
    """Where this run's window starts: the previous completed run's `until`, else `SYNC_START`."""
    previous = run.previous
    if previous is None:
        return START
    if not isinstance(previous.result, dict) or not previous.result.get("until"):
        why = previous.stored.dropped or f"its result was {previous.result!r}"
        raise PermanentError(
            f"the previous run {previous.key} left no 'until' cursor ({why}): "
            "set SYNC_START to the cursor to go on from and rename the job, which then starts anew"
        )
    return str(previous.result["until"])


def window_id(job: str, start: str, until: str) -> str:
    """The outbox document of the job's window [start, until)."""
    return f"{job}:{start}:{until}"


def copy_window(run: Run, start: str, until: str) -> bool:
    """Record the window's copy in the outbox; False if an earlier attempt of it already did."""
    document = _client().collection(OUTBOX).document(window_id(run.job, start, until))
    try:
        document.create(
            {
                "job": run.job,
                "since": start,
                "until": until,
                "run_key": run.key,
                "attempt_id": run.attempt_id,
                "copied_at": firestore.SERVER_TIMESTAMP,
            }
        )
    except AlreadyExists:
        return False
    return True


@functions_framework.http
@deduplicated
def handle(request):
    """Copy the changes of the window since the previous run, once, and return the new cursor."""
    knobs = json.loads(request.get_data(as_text=True) or "{}")
    run = current_run()
    start, until = since(run), run.schedule_time
    time.sleep(float(knobs.get("work_seconds", 0)))
    if knobs.get("fail") == "permanent":
        raise PermanentError("the change feed rejected the request (demo knob fail=permanent)")
    if knobs.get("fail") == "retryable":
        raise RuntimeError("the change feed timed out (demo knob fail=retryable)")
    copied = copy_window(run, start, until)
    if knobs.get("kill_after_effect"):
        # The whole instance dies, as on a crash or an OOM kill: runonce never writes the completion.
        os.killpg(os.getpgrp(), signal.SIGKILL)
    return {"until": until, "since": start, "copied": copied}
