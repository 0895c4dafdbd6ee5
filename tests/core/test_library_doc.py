"""docs/library.md's status, settings and log tables say what the code does."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from runonce import ConfigError
from runonce.contract import BodyEnd
from runonce.core.outcomes import Outcome
from runonce.core.settings import load_settings

LIBRARY = (Path(__file__).parents[2] / "docs" / "library.md").read_text()


def section(heading: str) -> str:
    """The text under `heading` (a whole line of docs/library.md), up to the next heading of its
    level or higher; a `#` line inside a fenced code block is code, not a heading."""
    lines = LIBRARY.splitlines()
    start = lines.index(heading) + 1
    higher = re.compile(rf"#{{1,{len(heading.split(' ', 1)[0])}}} ")
    fenced = False
    for end in range(start, len(lines)):
        fenced ^= lines[end].startswith("```")
        if not fenced and higher.match(lines[end]):
            return "\n".join(lines[start:end])
    return "\n".join(lines[start:])


def table(heading: str) -> list[list[str]]:
    """The rows of the first table under `heading`, past its header and rule."""
    rows = []
    for line in section(heading).splitlines():
        if line.startswith("|"):
            rows.append([cell.strip() for cell in line.strip("|").split("|")])
        elif rows:
            break
    assert len(rows) > 2, f"no table under {heading!r}"
    return rows[2:]


def settings_rows(heading: str) -> dict[str, list[str]]:
    """A settings table by variable name: `RUNONCE_X` (`option`) -> its cells."""
    return {re.sub(r"^`(\w+)`.*$", r"\1", row[0]): row for row in table(heading)}


def test_the_status_table_lists_every_outcome_with_its_status():
    rows = {(int(row[0]), row[1].strip("`")) for row in table("## What Scheduler is answered")}
    assert rows == {(outcome.status, outcome.label) for outcome in Outcome}


def test_the_settings_table_gives_the_defaults_the_code_uses():
    defaults = load_settings({}, environ={})
    documented = {name: row[1] for name, row in settings_rows("## Settings").items()}
    assert documented["RUNONCE_LEASE_SECONDS"] == str(int(defaults.lease.total_seconds()))
    assert documented["RUNONCE_RETENTION_SECONDS"].startswith(str(int(defaults.retention.total_seconds())))
    assert documented["RUNONCE_COLLECTION"] == f"`{defaults.collection}`"
    assert documented["RUNONCE_DATABASE"] == f"`{defaults.database}`"
    assert documented["RUNONCE_FORCED_SKEW_SECONDS"] == str(int(defaults.forced_skew.total_seconds()))


def documented_ranges(heading: str) -> list[tuple[str, int, int]]:
    """Every "LOW to HIGH" range a settings table states, with its variable."""
    ranges = []
    for name, row in settings_rows(heading).items():
        found = re.search(r"\b(\d+) to (\d+)\b", row[2])
        if found:
            ranges.append((name, int(found[1]), int(found[2])))
    return ranges


def test_the_settings_table_states_a_range_for_every_number_of_seconds():
    assert {name for name, _, _ in documented_ranges("## Settings")} == {
        "RUNONCE_LEASE_SECONDS",
        "RUNONCE_RETENTION_SECONDS",
        "RUNONCE_FORCED_SKEW_SECONDS",
    }


# The other two seconds settings, kept where every value in range is valid together.
_COMPANIONS = {
    "RUNONCE_LEASE_SECONDS": {"RUNONCE_RETENTION_SECONDS": "315360000"},
    "RUNONCE_RETENTION_SECONDS": {"RUNONCE_LEASE_SECONDS": "1"},
    "RUNONCE_FORCED_SKEW_SECONDS": {},
}


@pytest.mark.parametrize(("name", "low", "high"), documented_ranges("## Settings"))
def test_each_documented_range_is_the_one_the_code_accepts(name, low, high):
    for inside in (low, high):
        load_settings({}, environ={**_COMPANIONS[name], name: str(inside)})
    for outside in (low - 1, high + 1):
        with pytest.raises(ConfigError, match=name):
            load_settings({}, environ={**_COMPANIONS[name], name: str(outside)})


def test_the_logs_name_every_way_a_body_can_end():
    logs = section("## Logs")
    listed = re.search(r"`runonce_body_end`\s*\(([^)]*)\)", logs)
    assert listed, "the Logs section does not list the runonce_body_end values"
    assert set(re.findall(r"`(\w+)`", listed[1])) == {end.value for end in BodyEnd}
