"""Fixtures for the stacks tests: each example team is synthesized once per session."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import pytest
from cdktf import Testing

from stacks.team import TEAMS_DIR, Team, load_team_file
from stacks.team_stack import TeamStack


@dataclass(frozen=True)
class Synthesized:
    """A team's stack and its synthesized Terraform JSON."""

    team: Team
    stack: TeamStack
    json: str
    """As cdktf's Testing assertions take it."""

    @property
    def document(self) -> dict[str, Any]:
        """The JSON parsed."""
        return json.loads(self.json)

    def resources(self, kind: str) -> dict[str, dict[str, Any]]:
        """Every resource of one type, by logical id."""
        return self.document["resource"].get(kind, {})


def synthesize(team: Team, archive_dir) -> Synthesized:
    """Build and synthesize one team's stack in a test app (assets go to a temporary folder)."""
    stack = TeamStack(Testing.app(), team, archive_dir=archive_dir)
    return Synthesized(team, stack, Testing.synth(stack))


@pytest.fixture(scope="session")
def archive_dir(tmp_path_factory):
    """Where the tests build source archives (not the repository's build/)."""
    return tmp_path_factory.mktemp("archives")


@pytest.fixture(scope="session")
def example(archive_dir) -> Synthesized:
    """The example team (teams/example.py), synthesized."""
    return synthesize(load_team_file(TEAMS_DIR / "example.py"), archive_dir)


@pytest.fixture(scope="session")
def payments(archive_dir) -> Synthesized:
    """The payments team (teams/payments.py), synthesized."""
    return synthesize(load_team_file(TEAMS_DIR / "payments.py"), archive_dir)
