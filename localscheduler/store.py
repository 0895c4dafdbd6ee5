"""What Firestore says about a run: its ledger record and the effects its job wrote.

The scheduler never decides a run's fate from its own bookkeeping alone; it reads the ledger
the handler writes (found by runonce's own key function) and, for every job whose folder declares
them, the job's effects (see `effects`).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime

from google.cloud import firestore

from localscheduler.scheduler.plan import PlannedRun
from localscheduler.verdicts.effects import Effects
from runonce._instant import Instant
from runonce.contract import DEFAULT_COLLECTION
from runonce.scheduler.delivery import Delivery
from runonce.scheduler.keys import run_key
from stacks.naming import scheduler_job_name

RUNS_COLLECTION = DEFAULT_COLLECTION


def key_of(run: PlannedRun, forced: bool) -> str:
    """The run key the handler derives for deliveries of this run (forced: a "Force run")."""
    instant = Instant(utc=run.schedule_time.astimezone(UTC), nanos=0)
    job = scheduler_job_name(run.team.name, run.job.name)  # the JobName deployed Scheduler sends
    return run_key(Delivery(job, instant, run.team.project, run.team.region, forced))


@dataclass(frozen=True)
class StoreView:
    """One read of the ledger and of the declared effects."""

    records: dict[str, dict]
    """Ledger records by run key."""
    effects: dict[str, list[str | None]]
    """The attempts that wrote each run key's effects (None where the job does not record it)."""

    @classmethod
    def read(
        cls, client: firestore.Client, declared: Iterable[Effects], runs: str = RUNS_COLLECTION
    ) -> StoreView:
        """Read the ledger and every declared effects collection whole (a demo's worth)."""
        records = {doc.id: doc.to_dict() or {} for doc in client.collection(runs).stream()}
        effects: dict[str, list[str | None]] = {}
        for declaration in set(declared):
            for key, writers in declaration.read(client).items():
                effects.setdefault(key, []).extend(writers)
        return cls(records, effects)


def claimed(client: firestore.Client, key: str, attempts: int, collection: str = RUNS_COLLECTION) -> bool:
    """The run is held in progress by its `attempts`-th claim (an attempt is mid-run)."""
    snapshot = client.collection(collection).document(key).get()
    record = (snapshot.to_dict() or {}) if snapshot.exists else {}
    return record.get("status") == "in_progress" and record.get("attempts", 0) >= attempts


def as_utc(value: datetime) -> datetime:
    """A Firestore timestamp as an aware UTC datetime."""
    return value.astimezone(UTC)
