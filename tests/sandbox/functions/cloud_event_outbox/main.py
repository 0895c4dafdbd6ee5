"""Sandbox event job for Eventarc: store each CloudEvent in an outbox, exactly once per event.

Deployed by the sandbox team (tests/sandbox/teams.py) behind two Eventarc triggers, a bucket's
object finalize events and a topic's messages. The effect is a `create()` of the outbox document
named by the run key, so a body run again after its instance died finds it and writes nothing.
Each document keeps what the sandbox tests look the event up by: the event's data (the object
metadata, or the message data), its CloudEvent id and source, and the attempt that wrote it.
"""

import os

import functions_framework
from google.api_core.exceptions import AlreadyExists
from google.cloud import firestore

from runonce import Event, current_run, deduplicated_event

OUTBOX = "cloud_event_outbox"
_db = None


def _client() -> firestore.Client:
    global _db
    if _db is None:
        _db = firestore.Client(database=os.environ.get("RUNONCE_DATABASE", "(default)"))
    return _db


@functions_framework.cloud_event
@deduplicated_event
def handle(event: Event) -> dict:
    """Store the event in the outbox, once per event."""
    run = current_run()
    document = {
        "run_key": run.key,
        "attempt_id": run.attempt_id,
        "event_id": event.id,
        "event_source": event.source,
        "data": event.text(),
        "stored_at": firestore.SERVER_TIMESTAMP,
    }
    try:
        _client().collection(OUTBOX).document(run.key).create(document)
    except AlreadyExists:
        return {"stored": False}
    return {"stored": True}
