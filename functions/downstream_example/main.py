"""Example of the last service a run reaches: it charges an order once per idempotency token.

The token travels Scheduler -> proxy (run key) -> Workflows execution argument
(`runonce_idempotency_key`, see workflow.yaml) -> this service's `X-Runonce-Idempotency-Key`
header -> every state-changing step. A repeated request (the workflow retried its call) is
answered with the stored answer; each step runs once even if the endpoint's own record is lost.
"""

import os

import functions_framework
from google.cloud import firestore

from runonce.downstream import Steps, idempotent_endpoint
from runonce.targets import IDEMPOTENCY_HEADER

EFFECTS = os.environ.get("DOWNSTREAM_EFFECTS_COLLECTION", "downstream_effects")
steps = Steps()
_db: firestore.Client | None = None


def _client() -> firestore.Client:
    global _db
    if _db is None:
        _db = firestore.Client(database=os.environ.get("RUNONCE_DATABASE", "(default)"))
    return _db


def _record_effect(kind: str, token: str, order: dict) -> str:
    """The state change itself: one document per effect, so tests and operators can count them."""
    _, ref = _client().collection(EFFECTS).add({"kind": kind, "token": token, "order": order})
    return ref.id


@functions_framework.http
@idempotent_endpoint(name="charge-order")
def handle(request):
    """Charge the order, then send its receipt: two state-changing steps, each once per token."""
    token = request.headers[IDEMPOTENCY_HEADER]
    order = request.get_json(silent=True) or {}
    charge = steps.run(token, "charge-card", lambda: _record_effect("charge", token, order))
    receipt = steps.run(token, "send-receipt", lambda: _record_effect("receipt", token, order))
    return {"outcome": "charged", "charge": charge, "receipt": receipt}
