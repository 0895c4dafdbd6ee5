"""The run key: one SHA-256 hex digest per scheduled run, stable across refactoring."""

from __future__ import annotations

import hashlib
import json

from ..core.occurrence import KEY_VERSION
from .delivery import Delivery


def run_key(delivery: Delivery) -> str:
    """Hash project, location, job, the exact UTC instant, and whether the run was forced.

    The parts are JSON-encoded as a list, so no choice of header values can make two different
    runs collide by shifting a separator. A forced run gets a key of its own: it must not
    swallow the scheduled run whose time it carries.
    """
    parts = [
        KEY_VERSION,
        delivery.project,
        delivery.location,
        delivery.job,
        delivery.schedule_time.rfc3339(),
        "forced" if delivery.forced else "scheduled",
    ]
    encoded = json.dumps(parts, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
    return hashlib.sha256(encoded).hexdigest()


def rerun_slot(project: str, location: str, job: str) -> str:
    """The id of a Scheduler job's re-run request record (docs/rerun.md): one per job, in the
    ledger's collection; its `rerun-` prefix keeps it apart from every run key (hex digits only)."""
    parts = [KEY_VERSION, project, location, job, "rerun"]
    encoded = json.dumps(parts, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
    return "rerun-" + hashlib.sha256(encoded).hexdigest()
