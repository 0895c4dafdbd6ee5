"""runonce: exactly-once effects for Cloud Scheduler jobs and Pub/Sub or CloudEvent functions,
on a Firestore run ledger.

import functions_framework
from runonce import deduplicated, deduplicated_event, PermanentError

@functions_framework.http
@deduplicated
def handle(request):
    ...

@functions_framework.http  # a Pub/Sub push subscription's endpoint
@deduplicated_event
def on_message(event):
    ...
"""

from ._clock import set_clock
from .contract import RunStatus
from .core.errors import (
    ConfigError,
    EventRetry,
    NestedRunError,
    NotRunnable,
    OutcomeUnknown,
    PermanentError,
    StoreDenied,
    StoreError,
    StoreRejected,
    StoreUnavailable,
)
from .core.outcomes import Outcome
from .core.run import Event, Run, current_run
from .core.settings import EventSettings, Settings, load_event_settings, load_settings
from .core.store import Claim, Held, Store, StoredResult
from .events.adapter import deduplicated_event
from .events.parse import BadEnvelope
from .scheduler.adapter import deduplicated
from .scheduler.delivery import BadDelivery, Delivery, parse_delivery
from .scheduler.keys import run_key
from .store.firestore import Ledger

__all__ = [
    "BadDelivery",
    "BadEnvelope",
    "Claim",
    "ConfigError",
    "Delivery",
    "Event",
    "EventRetry",
    "EventSettings",
    "Held",
    "Ledger",
    "NestedRunError",
    "NotRunnable",
    "Outcome",
    "OutcomeUnknown",
    "PermanentError",
    "Run",
    "RunStatus",
    "Settings",
    "Store",
    "StoreDenied",
    "StoreError",
    "StoreRejected",
    "StoreUnavailable",
    "StoredResult",
    "current_run",
    "deduplicated",
    "deduplicated_event",
    "load_event_settings",
    "load_settings",
    "parse_delivery",
    "run_key",
    "set_clock",
]
