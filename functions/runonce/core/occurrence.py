"""One thing to run exactly once, as an adapter read it from its request, under its run key.

A run key is the SHA-256 hex digest of a JSON list that starts with `KEY_VERSION`: the scheduled
adapter's (`runonce.scheduler.keys`) and the event adapter's (`runonce.events.parse`) alike.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, NamedTuple

from .store import Claim, Done, JobLock

if TYPE_CHECKING:
    from .event import EventRun
    from .run import Run

# Bump only with a migration: every stored record is found by a key of this version.
KEY_VERSION = "runonce/v1"

# What json.dumps(parts, ensure_ascii=False, separators=(",", ":")) would build at every call.
_PARTS = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"))


def key_digest(parts: list[Any]) -> str:
    """The SHA-256 hex digest of `parts` (starting with `KEY_VERSION`) as a compact JSON list: no
    choice of values can make two different lists collide by shifting a separator."""
    return hashlib.sha256(_PARTS.encode(parts).encode("utf-8")).hexdigest()


class Occurrence(NamedTuple):
    """One thing to run exactly once, as an adapter read it from its request."""

    key: str
    """The run key: the ledger record's id."""
    fields: dict[str, Any]
    """Stored with the claim, for operators (job, schedule time, subscription, ...)."""
    run: Callable[[Claim], Run | EventRun]
    """What `current_run()` returns to the job (a scheduled `Run`, an `EventRun`), for the claim
    this attempt holds."""
    expired: str | None = None
    """Set when the occurrence must not run (an event past its maximum age): a first claim is
    recorded failed with this error and answered `too_old`. A takeover runs the job all the same:
    the attempt it takes over claimed the occurrence and may have started the body, so its effect
    may exist, and the effect is keyed, where a dead-letter copy's replay would repeat it."""
    lock: JobLock | None = None
    """The job's lock, taken with the claim, when the job's overlap policy is `skip` or `wait`."""
    done: Done | None = None
    """Where its completion is entered in its job's completions (`Run.previous`), if anywhere."""
