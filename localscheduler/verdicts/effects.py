"""Where a job's effects can be seen locally, as its function folder declares them.

The verdict counts each run's effects from where the job wrote them, never from what the job
logged or the harness expected. Only the job knows where that is, so its folder says so in the
`[effects]` table of its `local_demo.toml` (see `folder_file`):

    [effects]
    # One Firestore document per effect, naming the run it belongs to.
    collection = "report_outbox"
    run_key_field = "run_key"        # the field holding current_run().key
    attempt_id_field = "attempt_id"  # optional: the field holding current_run().attempt_id

A folder without the table is judged on the ledger and its bodies alone (the table says so). A job
with a `target` runs the proxy shipped with runonce against the Google APIs stand-in: its effects
are what the stand-in started, each found by the run key its start request carried.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from google.cloud import firestore

from emulator.googleapis import GoogleApisStandIn
from localscheduler.folder_file import check_fields, read_section, text_field

SECTION = "effects"
_FIELDS = ("collection", "run_key_field", "attempt_id_field")


# A run key (runonce.scheduler.keys: sha256 hex) standing alone in a request's path, headers or body.
_RUN_KEY = re.compile(r"(?<![0-9a-f])[0-9a-f]{64}(?![0-9a-f])")


class Effects(Protocol):
    """Where some jobs' effects can be read."""

    def read(self, client: firestore.Client) -> dict[str, list[str | None]]:
        """The writers of every effect found, by run key (None: the writer is not known)."""
        ...


@dataclass(frozen=True)
class FirestoreEffects:
    """Effects kept as Firestore documents, one per effect, each naming its run key."""

    collection: str
    run_key_field: str = "run_key"
    attempt_id_field: str | None = None
    """The field naming the attempt that wrote the effect; None: writers are not known."""

    def read(self, client: firestore.Client) -> dict[str, list[str | None]]:
        """The writers of every effect in the collection, by run key (None: writer not recorded)."""
        writers: dict[str, list[str | None]] = {}
        for doc in client.collection(self.collection).stream():
            effect = doc.to_dict() or {}
            writer = effect.get(self.attempt_id_field) if self.attempt_id_field else None
            writers.setdefault(str(effect.get(self.run_key_field)), []).append(writer)
        return writers


@dataclass(frozen=True)
class StartedAtStandIn:
    """A proxied job's effects: each thing the Google APIs stand-in started (an execution, a
    build, a generic call), under the run key its start request carried."""

    stand_in: GoogleApisStandIn

    def read(self, client: firestore.Client) -> dict[str, list[str | None]]:
        """Starts by run key; the proxy's attempt is not recorded at the API (None)."""
        starts: dict[str, list[str | None]] = {}
        for started in self.stand_in.started():
            call = started.request
            text = json.dumps([call.path, call.headers, call.body], default=str)
            for key in set(_RUN_KEY.findall(text)):
                starts.setdefault(key, []).append(None)
        return starts


def declared_effects(source_dir: Path) -> FirestoreEffects | None:
    """The effects the folder's local_demo.toml declares; None if it declares none."""
    found = read_section(source_dir, SECTION)
    if found is None:
        return None
    table, path = found
    check_fields(table, _FIELDS, path, SECTION)
    return FirestoreEffects(
        collection=text_field(table, "collection", path, SECTION, "report_outbox", required=True) or "",
        run_key_field=text_field(table, "run_key_field", path, SECTION, "run_key") or "run_key",
        attempt_id_field=text_field(table, "attempt_id_field", path, SECTION, "attempt_id"),
    )
