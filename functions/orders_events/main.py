"""Example event job: record each paid order's receipt exactly once.

A Pub/Sub push subscription delivers each order message to this function (stacks: the example
team's `orders` event job). The effect is a `create()` of the receipt document named by the
run key, so an attempt that died after writing it and is delivered again finds it there and is
done; a message that is not an order fails permanently and runonce dead-letters it. The receipt
names its run key and the attempt that wrote it, which is how the local demo finds it
(local_demo.toml).
"""

import os
from contextlib import suppress

import functions_framework
from google.api_core.exceptions import AlreadyExists
from google.cloud import firestore

from runonce import Event, PermanentError, current_run, deduplicated_event

RECEIPTS = os.environ.get("ORDERS_RECEIPTS_COLLECTION", "order_receipts")
_db = None


def _client() -> firestore.Client:
    global _db
    if _db is None:
        _db = firestore.Client(database=os.environ.get("RUNONCE_DATABASE", "(default)"))
    return _db


@functions_framework.http
@deduplicated_event
def handle(event: Event) -> dict:
    """Write the order's receipt, once per message."""
    run = current_run()
    try:
        order = event.json()
        receipt = {"order_id": str(order["order_id"]), "amount": order["amount"], "event_id": event.id}
    except (ValueError, KeyError, TypeError) as error:
        raise PermanentError(f"not an order message: {error}") from error
    receipt.update(run_key=run.key, attempt_id=run.attempt_id)
    # AlreadyExists: an earlier attempt of this event wrote it and died before runonce recorded it.
    with suppress(AlreadyExists):
        _client().collection(RECEIPTS).document(run.key).create(receipt)
    return {"order_id": receipt["order_id"]}
