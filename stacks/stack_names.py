"""`make deploy STACK=...`: turn what a user types into the stack name cdktf knows.

A stack is named after its team (`Team.name`), not after its file, but users type either:
`orders`, `orders.py` or `teams/orders.py`. A file name is mapped to its team's stack, and the
answer says so; a name nobody uses gets the list of the stacks there are.

    python -m stacks.stack_names teams/orders.py   # prints the stack name, explains on stderr
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from pathlib import Path

from stacks.config.team import TEAMS_DIR
from stacks.config.team_files import read_team_folder, shown_path

TEAMS_DIR_ENV = "RUNONCE_TEAMS_DIR"
"""Environment variable naming the folder of team files (default: teams/); main.py reads it too."""


@dataclass(frozen=True)
class Resolved:
    """The stack to deploy (None if there is none) and what to tell the user."""

    stack: str | None
    note: str


def resolve_stack(given: str, folder: Path = TEAMS_DIR) -> Resolved:
    """The stack `given` means: a team name, or a team file's name or path."""
    given = given.strip()
    loaded = read_team_folder(folder)
    by_file = {file.path.name: file for file in loaded.files}
    stacks = sorted({file.team.name for file in loaded.files})
    file_name = Path(given).name if given.endswith(".py") else f"{Path(given).name}.py"
    if given in stacks:
        owners = [file.shown for file in loaded.files if file.team.name == given]
        if len(owners) > 1:
            return Resolved(None, f"{len(owners)} team files define stack {given!r}: {', '.join(owners)}")
        return Resolved(given, "")
    if file_name in by_file:
        file = by_file[file_name]
        return Resolved(
            file.team.name, f"{given!r} is the team file {file.shown}; its stack is {file.team.name!r}"
        )
    if file_name.startswith("_"):
        return Resolved(
            None,
            f"{given!r} is not deployed (files starting with '_' are templates): copy it to "
            "teams/<team>.py and edit it",
        )
    broken = [p for p in loaded.problems if Path(p.file).name == file_name]
    if broken:
        return Resolved(
            None,
            f"{shown_path(folder / file_name)} does not load ({broken[0]}); `make synth` lists every problem",
        )
    known = ", ".join(f"{file.team.name} ({file.shown})" for file in loaded.files) or "none"
    return Resolved(None, f"no stack or team file is called {given!r}. Known stacks: {known}")


def main(argv: list[str] | None = None) -> int:
    """Print the stack name for the argument; exit 2 (with the reason) if there is none."""
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        print("usage: python -m stacks.stack_names <team name or team file>", file=sys.stderr)
        return 2
    resolved = resolve_stack(args[0], Path(os.environ.get(TEAMS_DIR_ENV) or TEAMS_DIR))
    if resolved.note:
        print(resolved.note, file=sys.stderr)
    if resolved.stack is None:
        return 2
    print(resolved.stack)
    return 0


if __name__ == "__main__":
    sys.exit(main())
