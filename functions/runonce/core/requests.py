"""An operator's request to run a finished run again (`runonce rerun`, docs/rerun.md): what
`Store.request_rerun` returns, and the refusal it raises.

Only the operators' command files requests; a delivery consumes one (`Store.take_rerun`, with the
`Rerun` and `RequestState` of `runonce.core.store`) and never loads this module.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from .errors import RunonceError


class RerunRefused(RunonceError):
    """The re-run cannot be requested: the message says why and what to do instead. Nothing written."""


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
