"""Example job: publish a run report to an outbox, exactly once per scheduled run.

Appending to an outbox is the kind of effect that must not happen twice (think: an email, an
invoice, a message to another team), so it is what runonce protects. The request body may carry
two knobs the local demo uses to misbehave on purpose: `work_seconds` (how long the job takes)
and `fail` (`"retryable"` raises an ordinary error, `"permanent"` raises PermanentError).
"""

import json
import os
import time

import functions_framework
from google.cloud import firestore

from runonce import PermanentError, current_run, deduplicated

OUTBOX = os.environ.get("REPORT_OUTBOX_COLLECTION", "report_outbox")
_db = None


def _client() -> firestore.Client:
    global _db
    if _db is None:
        _db = firestore.Client(database=os.environ.get("RUNONCE_DATABASE", "(default)"))
    return _db


@functions_framework.http
@deduplicated
def handle(request):
    """Build the report for this run and append it to the outbox."""
    knobs = json.loads(request.get_data(as_text=True) or "{}")
    time.sleep(float(knobs.get("work_seconds", 0)))
    if knobs.get("fail") == "permanent":
        raise PermanentError("report source rejected the request (demo knob fail=permanent)")
    if knobs.get("fail") == "retryable":
        raise RuntimeError("report source timed out (demo knob fail=retryable)")
    run = current_run()
    _, ref = (
        _client()
        .collection(OUTBOX)
        .add(
            {
                "run_key": run.key,
                "job": run.job,
                "schedule_time": run.schedule_time,
                "attempt_id": run.attempt_id,
                "published_at": firestore.SERVER_TIMESTAMP,
            }
        )
    )
    return {"report": ref.id}
