"""A problem found in the team files, and the one exception that reports them all.

Every check (loading a file, its field types, its values, names across teams) yields `Problem`s;
`main.py` prints them together, once, and exits non-zero before anything is built.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True)
class Problem:
    """One invalid setting: where it is, what is wrong, how to fix it."""

    team: str
    """Team name, or "" when the file is too broken to say."""
    job: str | None
    """Job name, or None for a team-level or file-level problem."""
    field: str
    """The field to change (`retry.retry_count`), or "file" for a file that does not load."""
    message: str
    """What is wrong, and why it matters."""
    fix: str
    """What to change."""
    file: str = ""
    """The team file, relative to the repository when inside it; "" when not known."""
    line: int | None = None
    """Line in the file, when known."""

    def __str__(self) -> str:
        where = self.file + (f":{self.line}" if self.file and self.line else "")
        parts = [f"team {self.team!r}"] if self.team else []
        if self.job:
            parts.append(f"job {self.job!r}")
        parts.append(f"field {self.field}")
        prefix = f"{where}: " if where else ""
        return f"{prefix}{', '.join(parts)}: {self.message}. Fix: {self.fix}."


class InvalidConfig(Exception):
    """Raised once with every problem found in the team files."""

    def __init__(self, problems: list[Problem]) -> None:
        self.problems = problems
        """All problems, in file, team and job order."""
        lines = "\n".join(f"  - {problem}" for problem in problems)
        super().__init__(f"{len(problems)} problem(s) in the team config:\n{lines}")


ProblemAt = Callable[[str, str, str], Problem]
"""Builds the `Problem` of one team (and job) from its field, message and fix."""
