"""The three Pub/Sub push functions `make bench` serves end to end, each from its own
functions-framework process.

They run the same body (a small dict, no store access) on the same push envelope, so their
latencies differ only by what deduplicates them:

- `floor`: no deduplication at all, the cost of functions-framework, HTTP, reading the envelope
  and the body;
- `transaction_pattern`: Google's advice for retried event functions (make them idempotent by
  the event id, https://cloud.google.com/functions/docs/bestpractices/retries and
  https://cloud.google.com/blog/topics/developers-practitioners/avoiding-gcf-anti-patterns-part-1-how-write-event-driven-cloud-functions-properly-coding-idempotency-mind):
  one Firestore transaction reads the document named by the message id, answers a duplicate if
  it exists, else writes it; then the body runs;
- `deduplicated_push`: the same body under runonce's `@deduplicated_event`.
"""

from __future__ import annotations

import functions_framework
from google.cloud import firestore

from runonce import Event, deduplicated_event

TRANSACTION_COLLECTION = "bench_processed_events"
_db: firestore.Client | None = None


def _body(message_id: str) -> dict:
    return {"stored": message_id}


def event_body(event: Event) -> dict:
    """The body under `@deduplicated_event`."""
    return _body(event.id)


@functions_framework.http
def floor(request):
    """The body alone."""
    return _body(request.get_json()["message"]["messageId"])


def first_time(db: firestore.Client, message_id: str) -> bool:
    """The pattern's store call: one transaction that reads the event id's document and writes it
    unless it exists (a begin, a read and a commit); False for a duplicate."""
    document = db.collection(TRANSACTION_COLLECTION).document(message_id)

    @firestore.transactional
    def check_and_record(transaction) -> bool:
        if document.get(transaction=transaction).exists:
            return False
        transaction.set(document, {"processed_at": firestore.SERVER_TIMESTAMP})
        return True

    return check_and_record(db.transaction())


@functions_framework.http
def transaction_pattern(request):
    """The body behind one transaction that checks and records the event id."""
    global _db
    if _db is None:
        _db = firestore.Client()
    return transaction_answer(_db, request)


def transaction_answer(db: firestore.Client, request) -> dict:
    """The pattern's handler: the event id read from the envelope, checked and recorded, the body run."""
    message_id = request.get_json()["message"]["messageId"]
    if not first_time(db, message_id):
        return {"outcome": "duplicate"}
    return {"outcome": "completed", "result": _body(message_id)}


@functions_framework.http
@deduplicated_event
def deduplicated_push(event: Event):
    """The body under `@deduplicated_event`."""
    return event_body(event)
