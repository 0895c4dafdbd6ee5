"""The example team's synthesized stack, compared with a reviewed snapshot.

Metadata (`//` blocks) is stripped and source digests are replaced by a placeholder, so the
snapshot changes only when the infrastructure does, not when the function code does (digests
have their own tests). After an intended change: `UPDATE_SNAPSHOTS=1 make test`, then review
the diff of tests/stacks/snapshots/.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

SNAPSHOTS = Path(__file__).parent / "snapshots"
DIGEST = re.compile(r"[0-9a-f]{64}")


def normalized(value):
    """The document without cdktf metadata and with every source digest replaced."""
    if isinstance(value, dict):
        return {key: normalized(child) for key, child in value.items() if key != "//"}
    if isinstance(value, list):
        return [normalized(child) for child in value]
    if isinstance(value, str):
        return DIGEST.sub("<source-digest>", value)
    return value


def test_example_stack_matches_the_snapshot(example):
    snapshot = SNAPSHOTS / "example.json"
    rendered = json.dumps(normalized(example.document), indent=2, sort_keys=True) + "\n"
    if os.environ.get("UPDATE_SNAPSHOTS") == "1":
        snapshot.write_text(rendered)
    assert snapshot.exists(), f"no snapshot yet: run with UPDATE_SNAPSHOTS=1 and commit {snapshot}"
    assert rendered == snapshot.read_text(), (
        "stack changed: UPDATE_SNAPSHOTS=1 to accept, then review the diff"
    )
