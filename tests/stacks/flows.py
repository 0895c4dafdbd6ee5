"""Every value that flows from one resource (or data source) into another in a synthesized stack:
each `${...}` reference to another block's attribute, where it is written, and how.

docs/stacks/shapes.md documents every kind of flow, one table row each; tests/stacks/test_flows.py
checks that every flow of the synthesized stacks is a documented row (and every row still
occurs), and that the shape each row documents is what its consumer takes.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

SHAPES_DOC = Path(__file__).resolve().parents[2] / "docs" / "stacks" / "shapes.md"
REFERENCE = re.compile(
    r"(?<![\w.])(?P<data>data\.)?(?P<type>(?:google|time)_[a-z0-9_]+)\.(?P<name>[A-Za-z0-9_-]+)"
    r"\.(?P<attribute>[a-z0-9_]+(?:\[\d+\])?(?:\.[a-z0-9_]+(?:\[\d+\])?)*)"
    r"|(?<![\w.])local\.(?P<local>[A-Za-z0-9_]+)-[A-Za-z0-9_-]+"
)
"""A block's attribute, or a local value (`local.KIND-PATH_HASH`, cdktf's name for a local a
construct defines: KIND is the construct's own name for it, the rest its path)."""


def local_kind(name: str) -> str:
    """A local's kind: its name up to cdktf's path (`monitoring_service-report_F161ABF7` ->
    `monitoring_service`)."""
    return name.split("-", 1)[0]


REF = "REF"
"""Where a row's `written as` form puts the reference (`data.TYPE.NAME.ATTRIBUTE` as written)."""
EMBEDDED = "…"
"""A `written as` form that starts and ends with it is found inside a longer value."""


@dataclass(frozen=True)
class Flow:
    """One reference in one field of one block."""

    source: str
    """The referenced attribute by block type: `google_service_account.email`,
    `data.google_project.number`, `google_cloudfunctions2_function.service_config[0].uri`."""
    consumer: str
    """The field it is written into, by block type, list positions left out:
    `google_project_iam_member.member`, `data.google_storage_bucket.lifecycle.postcondition.condition`."""
    reference: str
    """The reference as written (`google_service_account.x.email`)."""
    value: str
    """The whole field value it is written in."""
    address: str
    """The consumer block's address, for messages."""


def _expressions(value: str) -> Iterator[str]:
    """The text inside each `${...}` of a string (braces inside it balanced)."""
    start = value.find("${")
    while start != -1:
        depth, index = 0, start + 1
        while index < len(value):
            depth += {"{": 1, "}": -1}.get(value[index], 0)
            if depth == 0:
                break
            index += 1
        yield value[start + 2 : index]
        start = value.find("${", index)


def _fields(value: Any, path: tuple[str, ...]) -> Iterator[tuple[str, str]]:
    if isinstance(value, dict):
        for key, child in value.items():
            if key not in ("//", "depends_on"):
                yield from _fields(child, (*path, key))
    elif isinstance(value, list):
        for child in value:
            yield from _fields(child, path)
    elif isinstance(value, str) and "${" in value:
        yield ".".join(path), value


def flows(document: dict[str, Any]) -> list[Flow]:
    """Every reference to another block's attribute in a synthesized stack (`self.` references
    of postconditions and provider and variable references are not flows between blocks)."""
    fields = [
        (f"{prefix}{kind}.{field}", value, f"{prefix}{kind}.{name}")
        for section, prefix in (("resource", ""), ("data", "data."))
        for kind, blocks in document.get(section, {}).items()
        for name, config in blocks.items()
        for field, value in _fields(config, ())
    ]
    # A local is a block of its own: what flows into it, then from it (`local.KIND` as source).
    fields += [(f"local.{local_kind(name)}", value, f"local.{name}") for name, value in _locals(document)]
    found = []
    for consumer, value, address in fields:
        for expression in _expressions(value):
            for match in REFERENCE.finditer(expression):
                source = (
                    f"local.{match['local']}"
                    if match["local"]
                    else f"{match['data'] or ''}{match['type']}.{match['attribute']}"
                )
                found.append(Flow(source, consumer, match.group(0), value, address))
    return found


def _locals(document: dict[str, Any]) -> list[tuple[str, str]]:
    return [(name, value) for name, value in document.get("locals", {}).items() if isinstance(value, str)]


@dataclass(frozen=True)
class Row:
    """One documented kind of flow (a row of docs/stacks/shapes.md's table)."""

    source: str
    shape: str
    """The first example value of the shape at apply time (the first `code` of the shape column)."""
    consumer: str
    written: str
    """How the consumer writes the reference: `REF` for the reference, `{project}` and `{region}`
    for the team's; `…` at both ends for a part of a longer value."""


def _cells(line: str) -> list[str]:
    cells = re.split(r"(?<!\\)\|", line.strip().strip("|"))
    return [cell.strip().replace("\\|", "|") for cell in cells]


def _code(cell: str) -> str:
    found = re.search(r"`([^`]+)`", cell)
    return found.group(1) if found else ""


def documented_rows(doc: Path = SHAPES_DOC) -> list[Row]:
    """The rows of the flows table (the table whose header starts with `Source attribute`)."""
    rows, in_table = [], False
    for line in doc.read_text().splitlines():
        if line.startswith("| Source attribute"):
            in_table = True
            continue
        if in_table and not line.startswith("|"):
            break
        if in_table and not line.startswith("| ---"):
            source, shape, consumer, written, *_ = _cells(line)
            rows.append(Row(_code(source), _code(shape), _code(consumer), _code(written)))
    return rows


def matches(row: Row, flow: Flow, project: str, region: str) -> bool:
    """Whether a flow is of this row's kind: the same source and consumer, written as the row says."""
    if (row.source, row.consumer) != (flow.source, flow.consumer):
        return False
    written = row.written.replace("{project}", project).replace("{region}", region)
    embedded = written.startswith(EMBEDDED) and written.endswith(EMBEDDED)
    expected = written.strip(EMBEDDED).replace(REF, flow.reference)
    return expected in flow.value if embedded else expected == flow.value
