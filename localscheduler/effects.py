"""Where a job's effects can be seen locally, as its function folder declares them.

The verdict counts each run's effects from where the job wrote them, never from what the job
logged or the harness expected. Only the job knows where that is, so its folder says so in
`local_effects.toml` (read by `make demo` and the chaos suite; deployed with the folder, unused there):

    # One Firestore document per effect, naming the run it belongs to.
    collection = "report_outbox"
    run_key_field = "run_key"        # the field holding current_run().key
    attempt_id_field = "attempt_id"  # optional: the field holding current_run().attempt_id

A folder without the file is judged on the ledger and its bodies alone (the table says so). A job
with a `target` runs the proxy shipped with runonce against the Google APIs stand-in: its effects
are what the stand-in started, each found by the run key its start request carried.
"""

from __future__ import annotations

import json
import re
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from google.cloud import firestore

from emulator.googleapis import GoogleApisStandIn

EFFECTS_FILE = "local_effects.toml"
_FIELDS = ("collection", "run_key_field", "attempt_id_field")


# A run key (runonce.keys: sha256 hex) standing alone in a request's path, headers or body.
_RUN_KEY = re.compile(r"(?<![0-9a-f])[0-9a-f]{64}(?![0-9a-f])")


class Effects(Protocol):
    """Where some jobs' effects can be read."""

    def read(self, client: firestore.Client) -> dict[str, list[str | None]]:
        """The writers of every effect found, by run key (None: the writer is not known)."""
        ...


class EffectsFileError(ValueError):
    """A local_effects.toml that cannot be used; the message names the file, the field and the fix."""


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
    """The effects `source_dir/local_effects.toml` declares; None if the folder has no such file."""
    path = source_dir / EFFECTS_FILE
    if not path.is_file():
        return None
    try:
        declared = tomllib.loads(path.read_text())
    except tomllib.TOMLDecodeError as exc:
        raise EffectsFileError(f"{path}: not valid TOML ({exc}); fix the syntax") from None
    unknown = sorted(set(declared) - set(_FIELDS))
    if unknown:
        raise EffectsFileError(
            f"{path}: unknown field {unknown[0]!r}; the fields are {', '.join(_FIELDS)} "
            "(see localscheduler.effects)"
        )
    return FirestoreEffects(
        collection=_text(declared, "collection", path, required=True) or "",
        run_key_field=_text(declared, "run_key_field", path) or "run_key",
        attempt_id_field=_text(declared, "attempt_id_field", path),
    )


def _text(declared: Mapping[str, Any], name: str, path: Path, required: bool = False) -> str | None:
    value = declared.get(name)
    if value is None and not required:
        return None
    if not isinstance(value, str) or not value.strip():
        raise EffectsFileError(
            f'{path}: {name} must be a non-empty string, e.g. {name} = "{_EXAMPLES[name]}"'
        )
    return value


_EXAMPLES = {"collection": "report_outbox", "run_key_field": "run_key", "attempt_id_field": "attempt_id"}
