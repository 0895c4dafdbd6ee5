"""Settings from the environment, overridable per decorator, validated once at first use."""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import timedelta

from .errors import ConfigError

DEFAULT_LEASE_SECONDS = 900
DEFAULT_RETENTION_SECONDS = 7 * 24 * 3600
DEFAULT_COLLECTION = "scheduler_runs"
DEFAULT_DATABASE = "(default)"
# A ScheduleTime further ahead of the clock than this is a forced run ("Force run" sends the
# next scheduled time); the allowance absorbs clock skew between Scheduler and the function.
DEFAULT_FORCED_SKEW_SECONDS = 60

_DATABASE_ID = re.compile(r"^[a-z][a-z0-9-]{2,61}[a-z0-9]$")


@dataclass(frozen=True)
class Settings:
    """Everything the handler needs to know about its ledger."""

    lease: timedelta
    """How long a claim protects a run from other deliveries; at least the function timeout."""
    retention: timedelta
    """How long a finished run's record is kept (Firestore TTL on expire_at)."""
    collection: str
    """Collection holding one record per run."""
    database: str
    """Firestore database id."""
    project: str | None
    """GCP project of the database; None lets the client infer it."""
    forced_skew: timedelta
    """How far in the future a ScheduleTime may be before the delivery counts as a forced run."""


def _seconds(name: str, raw: object, minimum: int, maximum: int) -> timedelta:
    try:
        value = int(str(raw).strip())
    except ValueError:
        raise ConfigError(
            f"{name}={raw!r} is not a whole number of seconds; set it to e.g. {minimum * 10}"
        ) from None
    if not minimum <= value <= maximum:
        raise ConfigError(f"{name}={value} is out of range; set it between {minimum} and {maximum} seconds")
    return timedelta(seconds=value)


def load_settings(
    overrides: Mapping[str, object] | None = None, environ: Mapping[str, str] | None = None
) -> Settings:
    """Merge decorator overrides over RUNONCE_* environment variables and validate the result.

    Raises ConfigError naming the setting and the fix; nothing is read from the store before.
    """
    env = os.environ if environ is None else environ
    given = {key: value for key, value in (overrides or {}).items() if value is not None}

    def pick(option: str, variable: str, default: object) -> tuple[str, object]:
        if option in given:
            return f"{option} (decorator option)", given[option]
        return variable, env.get(variable, default)

    lease = _seconds(*pick("lease", "RUNONCE_LEASE_SECONDS", DEFAULT_LEASE_SECONDS), 1, 24 * 3600)
    retention = _seconds(
        *pick("retention", "RUNONCE_RETENTION_SECONDS", DEFAULT_RETENTION_SECONDS), 60, 3650 * 24 * 3600
    )
    if retention <= lease:
        raise ConfigError(
            f"retention ({int(retention.total_seconds())} s) must be longer than the lease "
            f"({int(lease.total_seconds())} s): raise RUNONCE_RETENTION_SECONDS "
            "or lower RUNONCE_LEASE_SECONDS"
        )
    skew = _seconds(*pick("forced_skew", "RUNONCE_FORCED_SKEW_SECONDS", DEFAULT_FORCED_SKEW_SECONDS), 0, 3600)

    name, collection = pick("collection", "RUNONCE_COLLECTION", DEFAULT_COLLECTION)
    collection = str(collection)
    if not collection or "/" in collection or collection.startswith("__") or len(collection.encode()) > 1500:
        raise ConfigError(
            f"{name}={collection!r} is not a Firestore collection id; use letters, digits, - or _, "
            f"e.g. {DEFAULT_COLLECTION}"
        )

    name, database = pick("database", "RUNONCE_DATABASE", DEFAULT_DATABASE)
    database = str(database)
    if database != DEFAULT_DATABASE and not _DATABASE_ID.match(database):
        raise ConfigError(
            f"{name}={database!r} is not a Firestore database id; use {DEFAULT_DATABASE} or 4-63 "
            "lowercase letters, digits and hyphens starting with a letter"
        )

    project = given.get("project") or env.get("GOOGLE_CLOUD_PROJECT") or None
    return Settings(
        lease=lease,
        retention=retention,
        collection=collection,
        database=database,
        project=str(project) if project else None,
        forced_skew=skew,
    )
