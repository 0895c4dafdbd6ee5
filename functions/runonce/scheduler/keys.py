"""The run key: one SHA-256 hex digest per scheduled run, stable across refactoring."""

from __future__ import annotations

from ..core.occurrence import KEY_VERSION, key_digest
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
    return key_digest(parts)


def rerun_slot(project: str, location: str, job: str) -> str:
    """The id of a Scheduler job's re-run request record (docs/rerun.md): one per job, in the
    ledger's collection; its `rerun-` prefix keeps it apart from every run key (hex digits only)."""
    parts = [KEY_VERSION, project, location, job, "rerun"]
    return "rerun-" + key_digest(parts)


def job_lock(project: str, location: str, job: str) -> str:
    """The id of a Scheduler job's lock record (a `skip` or `wait` job's, docs/schedules/overlap.md): one per
    job, in the ledger's collection; its `lock-` prefix keeps it apart from every run key."""
    parts = [KEY_VERSION, project, location, job, "lock"]
    return "lock-" + key_digest(parts)


def completions(project: str, location: str, job: str) -> str:
    """The id prefix of a Scheduler job's completions index (`Run.previous`): entries in the
    ledger's collection, its `done-` prefix keeps them apart from every run key. A renamed job
    (another project, location or job id) has another index."""
    parts = [KEY_VERSION, project, location, job, "done"]
    return "done-" + key_digest(parts)
