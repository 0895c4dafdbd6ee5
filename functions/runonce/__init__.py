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

from .clock import set_clock
from .contract import RunStatus
from .delivery import BadDelivery, Delivery, parse_delivery
from .errors import (
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
from .event import BadEnvelope, Event
from .events import deduplicated_event
from .keys import run_key
from .ledger import Claim, Held, Ledger
from .outcomes import Outcome
from .results import StoredResult
from .run import Run, current_run
from .scheduled import deduplicated
from .settings import EventSettings, Settings, load_event_settings, load_settings
from .store import Store

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
