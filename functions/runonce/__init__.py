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

These names are the public surface (docs/library.md, "Public names"); every other name lives in
its package (`runonce.core`, `runonce.store`, `runonce.scheduler`, `runonce.events`,
`runonce.targets`, `runonce.downstream`) and is imported from there. The decorators' modules load
the Google clients, so they are imported at their first use: `runonce.contract` and the rest of
the package import without Google's libraries.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from ._clock import set_clock
from ._version import __version__
from .core.errors import ConfigError, EventRetry, OutcomeUnknown, PermanentError, RunonceError
from .core.run import Run, current_run

if TYPE_CHECKING:
    from .core.event import Event
    from .events.adapter import deduplicated_event
    from .scheduler.adapter import deduplicated

# Loaded at their first use: the decorators' modules load the Google clients, and a scheduled
# function never needs the event types.
_LOADED_AT_FIRST_USE = {
    "Event": ".core.event",
    "deduplicated": ".scheduler.adapter",
    "deduplicated_event": ".events.adapter",
}

__all__ = [
    "ConfigError",
    "Event",
    "EventRetry",
    "OutcomeUnknown",
    "PermanentError",
    "Run",
    "RunonceError",
    "__version__",
    "current_run",
    "deduplicated",
    "deduplicated_event",
    "set_clock",
]


def __getattr__(name: str) -> Any:
    """A name of `_LOADED_AT_FIRST_USE`, imported at its first use."""
    module = _LOADED_AT_FIRST_USE.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module, __name__), name)
    globals()[name] = value  # later uses find it without coming here
    return value
