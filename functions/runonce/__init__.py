"""runonce: exactly-once effects for Cloud Scheduler HTTP jobs, on a Firestore run ledger.

import functions_framework
from runonce import deduplicated, PermanentError

@functions_framework.http
@deduplicated
def handle(request):
    ...
"""

from .clock import set_clock
from .contract import RunStatus
from .delivery import BadDelivery, Delivery, parse_delivery
from .errors import (
    ConfigError,
    NestedRunError,
    NotRunnable,
    PermanentError,
    StoreDenied,
    StoreError,
    StoreRejected,
    StoreUnavailable,
)
from .keys import run_key
from .ledger import Claim, Held, Ledger
from .outcomes import Outcome
from .results import StoredResult
from .run import Run, current_run
from .scheduled import deduplicated
from .settings import Settings, load_settings
from .store import Store

__all__ = [
    "BadDelivery",
    "Claim",
    "ConfigError",
    "Delivery",
    "Held",
    "Ledger",
    "NestedRunError",
    "NotRunnable",
    "Outcome",
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
    "load_settings",
    "parse_delivery",
    "run_key",
    "set_clock",
]
