"""What the store says about a run: its ledger record, and the effects its job wrote.

The scheduler never decides a run's fate from its own bookkeeping alone; it reads the ledger
the handler writes (found by runonce's own key function) and, for every job whose folder declares
them, the job's effects (see `effects`) in Firestore. The ledger is where the instances keep
their runs (`ledger`): the Firestore emulator, or a Valkey server that `RUNONCE_STORE` names,
while the effects stay in Firestore.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, Protocol

from google.cloud import firestore

from localscheduler.scheduler.plan import PlannedRun
from localscheduler.verdicts.effects import Effects
from runonce._instant import Instant
from runonce.contract import DEFAULT_COLLECTION, STORE_VARIABLE
from runonce.scheduler.delivery import Delivery
from runonce.scheduler.keys import run_key
from stacks.naming import scheduler_job_name

RUNS_COLLECTION = DEFAULT_COLLECTION


def key_of(run: PlannedRun, forced: bool) -> str:
    """The run key the handler derives for deliveries of this run (forced: a "Force run")."""
    instant = Instant(utc=run.schedule_time.astimezone(UTC), nanos=0)
    job = scheduler_job_name(run.team.name, run.job.name)  # the JobName deployed Scheduler sends
    return run_key(Delivery(job, instant, run.team.project, run.team.region, forced))


class Ledger(Protocol):
    """The ledger records the instances wrote, as the judges read them."""

    def records(self) -> dict[str, dict]:
        """Every record, by run key (a demo's or a chaos run's worth)."""
        ...

    def read(self, key: str) -> dict | None:
        """The record of `key`, or None."""
        ...


@dataclass(frozen=True)
class FirestoreLedger:
    """The ledger in a Firestore collection."""

    client: firestore.Client
    collection: str = RUNS_COLLECTION

    def records(self) -> dict[str, dict]:
        """See `Ledger.records`."""
        return {doc.id: doc.to_dict() or {} for doc in self.client.collection(self.collection).stream()}

    def read(self, key: str) -> dict | None:
        """See `Ledger.read`."""
        snapshot = self.client.collection(self.collection).document(key).get()
        return (snapshot.to_dict() or {}) if snapshot.exists else None


ServerInstant = Callable[[datetime], datetime]
"""An instant of the Valkey server's clock as the judges' timeline reads it."""

FINISHED_AT_FIELD = "finished_at"
"""The one instant of a record the judges compare with the schedule (the retry window's end)."""


@dataclass(frozen=True)
class ValkeyLedger:
    """The ledger on the Valkey server `url` names (RUNONCE_STORE), its records under `prefix`
    (the instances' collection setting). The server writes its own clock into a record (`TIME`:
    leases are judged on the server's clock, never an instance's), so where the instances run on
    an accelerated clock, `timeline` maps a record's finishing instant onto it."""

    url: str
    prefix: str = RUNS_COLLECTION
    timeline: ServerInstant | None = None

    @functools.cached_property
    def _store(self) -> Any:
        """The store's reads, on one client (its connection pool serves every thread)."""
        from runonce.store.valkey import connect  # the valkey extra: loaded only for this ledger

        return connect(self.url, self.prefix, timedelta(seconds=1), timedelta(days=1))

    def records(self) -> dict[str, dict]:
        """See `Ledger.records`: the server's index of every record under the prefix."""
        return {key: self._on_timeline(record) for key, record in self._store.find({}).items()}

    def read(self, key: str) -> dict | None:
        """See `Ledger.read`."""
        record = self._store.read(key)
        return None if record is None else self._on_timeline(record)

    def _on_timeline(self, record: dict) -> dict:
        if self.timeline is None or not isinstance(record.get(FINISHED_AT_FIELD), datetime):
            return record
        return {**record, FINISHED_AT_FIELD: self.timeline(record[FINISHED_AT_FIELD])}


def ledger(
    client: firestore.Client,
    store: str | None,
    collection: str = RUNS_COLLECTION,
    timeline: ServerInstant | None = None,
) -> Ledger:
    """The ledger the instances write: in `client`'s Firestore (`store` None), or on the Valkey
    server the URL `store` names."""
    if store is None:
        return FirestoreLedger(client, collection)
    return ValkeyLedger(store, collection, timeline)


def store_env(store: str | None) -> dict[str, str]:
    """The instances' environment for the run store (nothing: Firestore, as by default)."""
    return {} if store is None else {STORE_VARIABLE: store}


@dataclass(frozen=True)
class StoreView:
    """One read of the ledger and of the declared effects."""

    records: dict[str, dict]
    """Ledger records by run key."""
    effects: dict[str, list[str | None]]
    """The attempts that wrote each run key's effects (None where the job does not record it)."""

    @classmethod
    def read(cls, client: firestore.Client, declared: Iterable[Effects], runs: Ledger) -> StoreView:
        """Read the ledger `runs` whole, and every declared effects collection in `client`'s
        Firestore (a demo's worth)."""
        records = runs.records()
        effects: dict[str, list[str | None]] = {}
        for declaration in set(declared):
            for key, writers in declaration.read(client).items():
                effects.setdefault(key, []).extend(writers)
        return cls(records, effects)


def claimed(runs: Ledger, key: str, attempts: int) -> bool:
    """The run is held in progress by its `attempts`-th claim (an attempt is mid-run)."""
    record = runs.read(key) or {}
    return record.get("status") == "in_progress" and record.get("attempts", 0) >= attempts


def as_utc(value: datetime) -> datetime:
    """A Firestore timestamp as an aware UTC datetime."""
    return value.astimezone(UTC)
