"""Example job: publish a run report to an outbox, exactly once per scheduled run.

Publishing is the kind of effect that must not happen twice (think: an email, an invoice, a
message to another team), so it is what runonce protects. runonce guarantees that at most one
attempt holds a run at a time, but an attempt can die after its effect and before runonce records
the completion; the lease then expires and a retry runs the body again. The job closes that
window itself: its effect is a `create()` of the outbox document named by the run key, and an
"already exists" means an earlier attempt of this very run published it, so it is done.

The request body may carry three knobs the local demo uses to misbehave on purpose:
`work_seconds` (how long the job takes), `fail` (`"retryable"` raises an ordinary error,
`"permanent"` raises PermanentError) and `kill_after_effect` (the instance dies right after the
effect lands, before the completion is written: the crash window above).
"""

import json
import os
import signal
import time

import functions_framework
from google.api_core.exceptions import AlreadyExists
from google.cloud import firestore

from runonce import PermanentError, Run, current_run, deduplicated

OUTBOX = os.environ.get("REPORT_OUTBOX_COLLECTION", "report_outbox")
_db = None


def _client() -> firestore.Client:
    global _db
    if _db is None:
        _db = firestore.Client(database=os.environ.get("RUNONCE_DATABASE", "(default)"))
    return _db


def publish(run: Run) -> bool:
    """Write this run's report to the outbox; False if an earlier attempt of the run already did."""
    report = _client().collection(OUTBOX).document(run.key)
    try:
        report.create(
            {
                "run_key": run.key,
                "job": run.job,
                "schedule_time": run.schedule_time,
                "attempt_id": run.attempt_id,
                "published_at": firestore.SERVER_TIMESTAMP,
            }
        )
    except AlreadyExists:
        return False
    return True


@functions_framework.http
@deduplicated
def handle(request):
    """Build the report for this run and publish it to the outbox, once."""
    knobs = json.loads(request.get_data(as_text=True) or "{}")
    run = current_run()
    time.sleep(float(knobs.get("work_seconds", 0)))
    if knobs.get("fail") == "permanent":
        raise PermanentError("report source rejected the request (demo knob fail=permanent)")
    if knobs.get("fail") == "retryable":
        raise RuntimeError("report source timed out (demo knob fail=retryable)")
    published = publish(run)
    if knobs.get("kill_after_effect"):
        # The whole instance dies, as on a crash or an OOM kill: runonce never writes the completion.
        os.killpg(os.getpgrp(), signal.SIGKILL)
    return {"report": run.key, "published": published}
