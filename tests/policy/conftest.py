"""Fixtures for the policy tests: the every-feature team (tests/stacks/fixtures/every_feature.py),
synthesized once per session: a stack with every kind of resource the rules look at."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from stacks.team import TEAMS_DIR, load_team_file
from tests.stacks.conftest import synthesize

EVERY_FEATURE = Path(__file__).parent.parent / "stacks" / "fixtures" / "every_feature.py"


@pytest.fixture(scope="session")
def every(tmp_path_factory) -> dict[str, Any]:
    """The every-feature team's synthesized stack document (scheduled jobs, a proxy of each target
    kind, a push job, Eventarc jobs on a topic and on a bucket, a migration's kept accounts)."""
    return synthesize(load_team_file(EVERY_FEATURE), tmp_path_factory.mktemp("archives")).document


@pytest.fixture(scope="session")
def ledger(tmp_path_factory) -> dict[str, Any]:
    """The ledger team's synthesized stack document (teams/ledger.py: a store on Memorystore for
    Valkey, its network and connector)."""
    return synthesize(load_team_file(TEAMS_DIR / "ledger.py"), tmp_path_factory.mktemp("archives")).document


@pytest.fixture(scope="session")
def pausing(tmp_path_factory) -> dict[str, Any]:
    """A team whose one job has pause_after_failures=3 (tests/stacks/test_pause.py), synthesized:
    its watchdog holds the pauser custom role."""
    from tests.stacks.test_pause import PAUSING

    return synthesize(PAUSING, tmp_path_factory.mktemp("archives")).document
