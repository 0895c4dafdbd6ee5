"""README's status and settings tables say what the code does."""

from __future__ import annotations

import re
from pathlib import Path

from runonce import Outcome, load_settings

README = (Path(__file__).parents[2] / "README.md").read_text()


def _table(heading: str) -> list[list[str]]:
    section = README.split(heading, 1)[1]
    rows = []
    for line in section.splitlines()[2:]:
        if not line.startswith("|"):
            if rows:
                break
            continue
        rows.append([cell.strip() for cell in line.strip("|").split("|")])
    return rows[2:]  # past the header and its rule


def test_the_status_table_lists_every_outcome_with_its_status():
    rows = {(int(row[0]), row[1].strip("`")) for row in _table("### What Scheduler is answered")}
    assert rows == {(outcome.status, outcome.label) for outcome in Outcome}


def test_the_settings_table_gives_the_defaults_the_code_uses():
    defaults = load_settings({}, environ={})
    documented = {re.sub(r"^`(\w+)`.*$", r"\1", row[0]): row[1] for row in _table("### Settings")}
    assert documented["RUNONCE_LEASE_SECONDS"] == str(int(defaults.lease.total_seconds()))
    assert documented["RUNONCE_RETENTION_SECONDS"].startswith(str(int(defaults.retention.total_seconds())))
    assert documented["RUNONCE_COLLECTION"] == f"`{defaults.collection}`"
    assert documented["RUNONCE_DATABASE"] == f"`{defaults.database}`"
    assert documented["RUNONCE_FORCED_SKEW_SECONDS"] == str(int(defaults.forced_skew.total_seconds()))
