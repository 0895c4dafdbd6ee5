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

The names whose modules load the Google clients (`deduplicated`, `deduplicated_event`,
`BadEnvelope`, `Ledger`) are imported at their first use, so `runonce.contract` and the rest of
the package import without Google's libraries.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from ._clock import set_clock
from .contract import RunStatus
from .core.errors import (
    ConfigError,
    EventRetry,
    NestedRunError,
    NotRunnable,
    OutcomeUnknown,
    PermanentError,
    RunonceError,
    StoreDenied,
    StoreError,
    StoreRejected,
    StoreUnavailable,
)
from .core.outcomes import Outcome
from .core.run import Event, Run, current_run
from .core.settings import EventSettings, Settings, load_event_settings, load_settings
from .core.store import Claim, Held, Store, StoredResult
from .scheduler.delivery import BadDelivery, Delivery, parse_delivery
from .scheduler.keys import run_key

if TYPE_CHECKING:
    from .events.adapter import deduplicated_event
    from .events.parse import BadEnvelope
    from .scheduler.adapter import deduplicated
    from .store.firestore import Ledger

_LOADED_AT_FIRST_USE = {
    "deduplicated": ".scheduler.adapter",
    "deduplicated_event": ".events.adapter",
    "BadEnvelope": ".events.parse",
    "Ledger": ".store.firestore",
}

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
    "RunonceError",
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


def __getattr__(name: str) -> Any:
    """A public name whose module loads the Google clients, imported at its first use."""
    module = _LOADED_AT_FIRST_USE.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module, __name__), name)
    globals()[name] = value  # later uses find it without coming here
    return value
