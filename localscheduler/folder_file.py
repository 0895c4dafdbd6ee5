"""A function folder's `local_demo.toml`: what only the local scheduler needs to know about it.

Deployed with the folder and unused there. One table per concern, each read by its own module:
`[effects]` (where the job's effects can be seen, `effects`) and `[events]` (what the demo
publishes to an event job). A mistake stops the demo with the file, the field and the fix.
"""

from __future__ import annotations

import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

FOLDER_FILE = "local_demo.toml"
SECTIONS = ("effects", "events")


class FolderFileError(ValueError):
    """A local_demo.toml that cannot be used; the message names the file, the field and the fix."""


def read_section(source_dir: Path, section: str) -> tuple[Mapping[str, Any], Path] | None:
    """The `[section]` table of `source_dir/local_demo.toml` and the file's path; None if the
    folder has no such file or the file no such table."""
    path = source_dir / FOLDER_FILE
    if not path.is_file():
        return None
    try:
        tables = tomllib.loads(path.read_text())
    except tomllib.TOMLDecodeError as exc:
        raise FolderFileError(f"{path}: not valid TOML ({exc}); fix the syntax") from None
    unknown = sorted(set(tables) - set(SECTIONS))
    if unknown:
        raise FolderFileError(
            f"{path}: unknown table or field {unknown[0]!r}; the tables are "
            f"{', '.join(f'[{name}]' for name in SECTIONS)}"
        )
    table = tables.get(section)
    if table is None:
        return None
    if not isinstance(table, dict):
        raise FolderFileError(f"{path}: {section} must be a table: put [{section}] on a line of its own")
    return table, path


def check_fields(table: Mapping[str, Any], fields: tuple[str, ...], path: Path, section: str) -> None:
    """Refuse a field of `[section]` that is not one of `fields` (a typo would otherwise be ignored)."""
    unknown = sorted(set(table) - set(fields))
    if unknown:
        raise FolderFileError(
            f"{path}: [{section}] has an unknown field {unknown[0]!r}; its fields are {', '.join(fields)}"
        )


def text_field(
    table: Mapping[str, Any], name: str, path: Path, section: str, example: str, required: bool = False
) -> str | None:
    """A non-empty string field of `[section]`; None when absent and not `required`."""
    value = table.get(name)
    if value is None and not required:
        return None
    if not isinstance(value, str) or not value.strip():
        raise FolderFileError(
            f'{path}: [{section}] {name} must be a non-empty string, e.g. {name} = "{example}"'
        )
    return value
