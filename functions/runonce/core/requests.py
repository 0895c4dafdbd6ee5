"""An operator's request to run a finished run again (`runonce rerun`, docs/rerun.md) or a missed
one (`runonce backfill`, the watchdog's catch-up: docs/schedules/backfill.md): what `Store.request_rerun`
returns, and the refusals it raises.

Only the operators' command files requests; a delivery consumes one (`Store.take_rerun`, with the
`Rerun` and `RequestState` of `runonce.core.store`) and never loads this module.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from .errors import RunonceError


class RerunRefused(RunonceError):
    """The re-run cannot be requested: the message says why and what to do instead. Nothing written."""


class RequestPending(RerunRefused):
    """The job's slot holds another pending request: try again once it is consumed or expired."""


class RunChanged(RerunRefused):
    """A missed run's record is no longer what its request expected: someone ran it meanwhile."""


@dataclass(frozen=True)
class RerunRequest:
    """An operator's pending request to run the finished run `key` again."""

    slot: str
    """The record that holds it: one per Scheduler job, so a job has at most one pending request."""
    request_id: str
    key: str
    schedule_time: str
    by: str
    at: datetime
    expires: datetime
