"""What Firestore says about a run: its ledger record and the effects its job wrote.

The scheduler never decides a run's fate from its own bookkeeping alone; it reads the ledger
the handler writes (found by runonce's own key function) and the example job's outbox.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from datetime import UTC, datetime

from google.cloud import firestore

from runonce import Delivery, run_key
from runonce.delivery import Instant
from stacks.naming import scheduler_job_name

from .plan import PlannedRun

RUNS_COLLECTION = "scheduler_runs"
OUTBOX_COLLECTION = "report_outbox"


def key_of(run: PlannedRun, forced: bool) -> str:
    """The run key the handler derives for deliveries of this run (forced: a "Force run")."""
    instant = Instant(utc=run.schedule_time.astimezone(UTC), nanos=0)
    job = scheduler_job_name(run.team.name, run.job.name)  # the JobName deployed Scheduler sends
    return run_key(Delivery(job, instant, run.team.project, run.team.region, forced))


@dataclass(frozen=True)
class StoreView:
    """One read of the ledger and the outbox: records by run key, effects counted by run key."""

    records: dict[str, dict]
    effects: Counter

    @classmethod
    def read(
        cls, client: firestore.Client, runs: str = RUNS_COLLECTION, outbox: str = OUTBOX_COLLECTION
    ) -> StoreView:
        """Read both collections whole (a demo's worth of documents)."""
        records = {doc.id: doc.to_dict() or {} for doc in client.collection(runs).stream()}
        effects = Counter((doc.to_dict() or {}).get("run_key") for doc in client.collection(outbox).stream())
        return cls(records, effects)


def claimed(client: firestore.Client, key: str, attempts: int, collection: str = RUNS_COLLECTION) -> bool:
    """The run is held in progress by its `attempts`-th claim (an attempt is mid-run)."""
    snapshot = client.collection(collection).document(key).get()
    record = (snapshot.to_dict() or {}) if snapshot.exists else {}
    return record.get("status") == "in_progress" and record.get("attempts", 0) >= attempts


def as_utc(value: datetime) -> datetime:
    """A Firestore timestamp as an aware UTC datetime."""
    return value.astimezone(UTC)
