"""The stacks' layers import one way only: team config -> validation -> constructs -> the stack."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import stacks.state
import stacks.targets
import stacks.team
from stacks.config import state, targets, team
from stacks.config.team import REPO_ROOT

STACKS = REPO_ROOT / "stacks"
# What each layer may not import: anything above it.
ABOVE = {
    "config": ("stacks.validate", "stacks.constructs", "stacks.team_stack", "cdktf", "constructs"),
    "validate": ("stacks.constructs", "stacks.team_stack", "cdktf", "constructs"),
    "constructs": ("stacks.validate", "stacks.team_stack"),
}


def imported(path: Path) -> list[str]:
    """Every module a file imports, by its dotted name."""
    names: list[str] = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names.extend(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.append(node.module)
    return names


@pytest.mark.parametrize("layer", sorted(ABOVE))
def test_a_layer_imports_nothing_above_it(layer):
    upward = [
        f"{path.relative_to(REPO_ROOT)} imports {name}"
        for path in sorted((STACKS / layer).glob("*.py"))
        for name in imported(path)
        if name.startswith(ABOVE[layer])
    ]
    assert upward == []


def test_the_team_file_modules_give_the_config_classes_themselves():
    for name in ("Team", "Job", "EventJob", "Retry", "PushRetry", "load_team_file", "TEAMS_DIR"):
        assert getattr(stacks.team, name) is getattr(team, name)
    for name in ("Workflow", "CloudRunJob", "BuildTrigger", "GoogleApi"):
        assert getattr(stacks.targets, name) is getattr(targets, name)
        assert getattr(stacks.team, name) is getattr(targets, name)
    assert stacks.state.GcsState is stacks.team.GcsState is state.GcsState


def _contract_names() -> dict[str, str]:
    """The values runonce.contract spells that no other module may spell again: its variables,
    headers and the ledger's collection and expiry field."""
    from runonce import contract

    values = {
        value: name
        for name, value in vars(contract).items()
        if name.isupper()
        and isinstance(value, str)
        and value.startswith(("RUNONCE_", "X-Runonce", "X-CloudScheduler"))
    }
    for name in ("DEFAULT_COLLECTION", "EXPIRE_AT_FIELD", "PROJECT_VARIABLE", "CONSUMER_VARIABLE"):
        values[getattr(contract, name)] = name
    return values


@pytest.mark.parametrize("folder", ["stacks", "policy", "localscheduler", "operate"])
def test_the_contracts_names_are_spelled_once(folder):
    names = _contract_names()
    spelled = [
        f"{path.relative_to(REPO_ROOT)}:{node.lineno}: {node.value!r} is runonce.contract.{names[node.value]}"
        for path in sorted((REPO_ROOT / folder).rglob("*.py"))
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value in names
    ]
    assert spelled == []
