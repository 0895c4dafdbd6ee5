"""Settings from the environment, overridable per decorator, validated once at first use."""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Mapping
from datetime import timedelta
from typing import NamedTuple

from .._text import clip
from ..contract import (
    COLLECTION_VARIABLE,
    DATABASE_VARIABLE,
    DEFAULT_COLLECTION,
    FORCED_SKEW_VARIABLE,
    LEASE_VARIABLE,
    PROJECT_VARIABLE,
    RETENTION_VARIABLE,
    STORE_VARIABLE,
    Overlap,
)
from .errors import ConfigError

DEFAULT_LEASE_SECONDS = 900
DEFAULT_RETENTION_SECONDS = 7 * 24 * 3600
DEFAULT_DATABASE = "(default)"
FIRESTORE = "firestore"
"""The `store` setting that names the Firestore ledger (the default)."""
VALKEY_SCHEMES = ("valkey://", "valkeys://")
"""How a `store` setting that names a Valkey store begins (`runonce.store.valkey.connect`)."""
# A ScheduleTime further ahead of the clock than this is a forced run ("Force run" sends the
# next scheduled time); the allowance absorbs clock skew between Scheduler and the function.
DEFAULT_FORCED_SKEW_SECONDS = 60
_DATABASE_ID = re.compile(r"[a-z][a-z0-9-]{2,61}[a-z0-9]")
_WHOLE_NUMBER = re.compile(r"-?[0-9]+")
_RESERVED_ID = re.compile(r"__.*__", re.DOTALL)


class Settings(NamedTuple):
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
    overlap: Overlap | None = None
    """The job's overlap policy as the decorator option `overlap` gives it (None: not given, the
    delivery's X-Runonce-Overlap header decides, docs/schedules/overlap.md)."""
    store: str = FIRESTORE
    """The run store: `firestore`, or a Valkey store's URL (its records named by `collection`)."""


def overlap_setting(name: str, raw: object) -> Overlap:
    """The overlap policy `raw` (an `Overlap` or its value, any case), given as `name`;
    ConfigError naming it and the allowed values otherwise."""
    if isinstance(raw, Overlap):
        return raw
    text = raw.strip().lower() if isinstance(raw, str) else None
    try:
        return Overlap(text)
    except ValueError:
        allowed = ", ".join(policy.value for policy in Overlap)
        raise ConfigError(f"{name}={shown(raw)} is not an overlap policy; use one of {allowed}") from None


def shown(raw: object) -> str:
    """A setting's value as an error message quotes it: repr, cut short."""
    return clip(repr(raw), 80)


def seconds_setting(name: str, raw: object, minimum: int, maximum: int, example: int) -> timedelta:
    """The setting `name` (its `raw` value) as a duration: whole seconds from `minimum` to `maximum`;
    ConfigError naming it, with `example`, otherwise."""
    text = str(raw).strip() if not isinstance(raw, bool) else ""
    # int() would also take "1_000", " +5" and non-ASCII digits such as "١٢٠": only plain ASCII digits.
    if not _WHOLE_NUMBER.fullmatch(text):
        raise ConfigError(
            f"{name}={shown(raw)} is not a whole number of seconds; set it to plain digits "
            f"between {minimum} and {maximum}, e.g. {example}"
        )
    value = int(text)
    if not minimum <= value <= maximum:
        raise ConfigError(f"{name}={value} is out of range; set it between {minimum} and {maximum} seconds")
    return timedelta(seconds=value)


def _collection_problem(collection: str) -> str | None:
    """Why `collection` cannot be a Firestore collection id, or None if it can."""
    if collection != collection.strip():
        return "has spaces around it"
    if not collection or collection in (".", ".."):
        return "is empty, . or .., which Firestore does not allow"
    if "/" in collection:
        return "contains /"
    if _RESERVED_ID.fullmatch(collection):
        return "has the __name__ form Firestore reserves"
    try:
        size = len(collection.encode("utf-8"))
    except UnicodeEncodeError:
        return "is not valid UTF-8"
    if size > 1500:
        return f"is {size} bytes long, more than Firestore's 1500"
    return None


def picker(
    overrides: Mapping[str, object] | None, environ: Mapping[str, str] | None
) -> Callable[[str, str, object], tuple[str, object]]:
    """`pick(option, variable, default)`: (where the value came from, the value); a decorator
    option that is not None wins over the environment variable."""
    env = os.environ if environ is None else environ
    given = {key: value for key, value in (overrides or {}).items() if value is not None}

    def pick(option: str, variable: str, default: object) -> tuple[str, object]:
        if option in given:
            return f"{option} (decorator option)", given[option]
        return variable, env.get(variable, default)

    return pick


def load_settings(
    overrides: Mapping[str, object] | None = None, environ: Mapping[str, str] | None = None
) -> Settings:
    """Merge decorator overrides over RUNONCE_* environment variables and validate the result.

    Raises ConfigError naming the setting and the fix; nothing is read from the store before.
    """
    pick = picker(overrides, environ)
    lease = seconds_setting(
        *pick("lease", LEASE_VARIABLE, DEFAULT_LEASE_SECONDS), 1, 24 * 3600, DEFAULT_LEASE_SECONDS
    )
    retention = seconds_setting(
        *pick("retention", RETENTION_VARIABLE, DEFAULT_RETENTION_SECONDS),
        60,
        3650 * 24 * 3600,
        DEFAULT_RETENTION_SECONDS,
    )
    if retention <= lease:
        raise ConfigError(
            f"retention ({int(retention.total_seconds())} s) must be longer than the lease "
            f"({int(lease.total_seconds())} s): raise RUNONCE_RETENTION_SECONDS "
            "or lower RUNONCE_LEASE_SECONDS"
        )
    skew = seconds_setting(
        *pick("forced_skew", FORCED_SKEW_VARIABLE, DEFAULT_FORCED_SKEW_SECONDS),
        0,
        3600,
        DEFAULT_FORCED_SKEW_SECONDS,
    )

    name, collection = pick("collection", COLLECTION_VARIABLE, DEFAULT_COLLECTION)
    collection = str(collection)
    problem = _collection_problem(collection)
    if problem is not None:
        raise ConfigError(
            f"{name}={shown(collection)} is not a Firestore collection id: it {problem}; use letters, "
            f"digits, - or _, e.g. {DEFAULT_COLLECTION}"
        )

    name, database = pick("database", DATABASE_VARIABLE, DEFAULT_DATABASE)
    database = str(database)
    if database != DEFAULT_DATABASE and not _DATABASE_ID.fullmatch(database):
        raise ConfigError(
            f"{name}={shown(database)} is not a Firestore database id; use {DEFAULT_DATABASE} or 4-63 "
            "lowercase letters, digits and hyphens starting with a letter"
        )

    project = str(pick("project", PROJECT_VARIABLE, "")[1] or "").strip() or None
    store = _store_choice((overrides or {}).get("store"), os.environ if environ is None else environ)
    overlap = (overrides or {}).get("overlap")
    return Settings(
        lease=lease,
        retention=retention,
        collection=collection,
        database=database,
        project=str(project) if project else None,
        forced_skew=skew,
        overlap=None if overlap is None else overlap_setting("overlap (decorator option)", overlap),
        store=store,
    )


def store_setting(name: str, raw: object) -> str:
    """The `store` setting given as `name`: `firestore` (any case), or a URL beginning valkey://
    or valkeys:// (checked whole when the store is built); ConfigError naming it, its password
    hidden, otherwise."""
    text = str(raw).strip()
    if text.lower() == FIRESTORE:
        return FIRESTORE
    if text.startswith(VALKEY_SCHEMES):
        return text
    raise ConfigError(
        f"{name}={shown(hidden_password(text))} names no run store: use {FIRESTORE} (the default), or a "
        "Valkey server's URL, valkey://HOST:PORT (valkeys://HOST:PORT for TLS)"
    )


def hidden_password(text: str) -> str:
    """`text` with the password of a URL's USER:PASSWORD@ shown as ***."""
    return re.sub(r"//([^:/@]*):[^@/]*@", r"//\1:***@", text)


def _store_choice(option: object, env: Mapping[str, str]) -> str:
    """The run store: the decorator option `store` or RUNONCE_STORE, else Firestore. Both given
    and naming different stores is a ConfigError: the runonce command and the watchdog find the
    runs by the variable, so a function recording them elsewhere would hide them."""
    variable = env.get(STORE_VARIABLE)
    if option is None:
        return store_setting(STORE_VARIABLE, FIRESTORE if variable is None else variable)
    chosen = store_setting("store (decorator option)", option)
    if variable is not None and store_setting(STORE_VARIABLE, variable) != chosen:
        raise ConfigError(
            f"the run store is {shown(hidden_password(chosen))} by the decorator option store= but "
            f"{shown(hidden_password(variable.strip()))} by {STORE_VARIABLE}: give it in one place (drop "
            f"the option, or unset {STORE_VARIABLE}), or make both the same"
        )
    return chosen
