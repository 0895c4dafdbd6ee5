"""Example event job: store each order pushed by Pub/Sub in an outbox, exactly once per message.

The effect is a `create()` of the outbox document named by the run key, so a body run again
after its instance died right after the effect finds the document and writes nothing. Each
document names its run key and the attempt that wrote it; `local_demo.toml` tells the local demo
where to find them (it reads how often a body ran from the lines the runonce core logs).

Message attributes are the knobs the local demo uses to misbehave on purpose, read like the
`report` job reads its request body: `work_seconds` (how long the job takes) and `fault`:
`retryable` (the first body raises an ordinary error), `always_retryable` (every body does, until
Pub/Sub dead-letters the message), `permanent` (raises PermanentError), `kill_before_effect` and
`kill_after_effect` (the first body's instance dies before, or right after, the effect). "First"
is decided by a marker document per run key, so a fault hits one body of a message, not all.
"""

import os
import signal
import time

import functions_framework
from google.api_core.exceptions import AlreadyExists
from google.cloud import firestore

from runonce import Event, PermanentError, Run, current_run, deduplicated_event

OUTBOX = "event_example_outbox"  # the collection local_demo.toml declares
FAULT_MARKS = "event_example_fault_marks"
_db = None


def _client() -> firestore.Client:
    global _db
    if _db is None:
        _db = firestore.Client(database=os.environ.get("RUNONCE_DATABASE", "(default)"))
    return _db


def _first_time(run: Run) -> bool:
    """True for the first body of this run to get here (it leaves a marker), False for any later."""
    try:
        _client().collection(FAULT_MARKS).document(run.key).create({"attempt_id": run.attempt_id})
    except AlreadyExists:
        return False
    return True


def store_order(run: Run, event: Event) -> bool:
    """Write this message's order to the outbox; False if an earlier body of it already did."""
    try:
        _client().collection(OUTBOX).document(run.key).create(
            {
                "run_key": run.key,
                "message_id": event.id,
                "subscription": event.source,
                "attempt_id": run.attempt_id,
                "order": event.text(),
                "stored_at": firestore.SERVER_TIMESTAMP,
            }
        )
    except AlreadyExists:
        return False
    return True


def _die() -> None:
    # The whole instance dies, as on a crash or an OOM kill: runonce never writes the finish.
    os.killpg(os.getpgrp(), signal.SIGKILL)


@functions_framework.http
@deduplicated_event
def handle(event: Event):
    """Store the pushed order in the outbox, once per message."""
    run = current_run()
    knobs = event.attributes
    fault = knobs.get("fault", "")
    time.sleep(float(knobs.get("work_seconds", 0)))
    if fault == "permanent":
        raise PermanentError("order rejected (demo knob fault=permanent)")
    if fault == "always_retryable" or (fault == "retryable" and _first_time(run)):
        raise RuntimeError(f"order service timed out (demo knob fault={fault})")
    if fault == "kill_before_effect" and _first_time(run):
        _die()
    stored = store_order(run, event)
    if fault == "kill_after_effect" and _first_time(run):
        _die()
    return {"order": run.key, "stored": stored}
