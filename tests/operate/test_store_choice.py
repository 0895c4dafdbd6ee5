"""The run store the `runonce` command works on: `runonce --store URL`, else RUNONCE_STORE (as the
team's functions are given it), else Firestore; one that names no store is bad input (exit 2)
naming where it was given, the password hidden, and nothing is read."""

from __future__ import annotations

import json
import os

import pytest

from tests.conftest import SCHEDULED


@pytest.fixture
def ledger_kind() -> str:
    return "valkey"


def _statuses(result) -> list[str]:
    assert result.exit_code == 0, result.stderr
    return [json.loads(line)["status"] for line in result.stdout.splitlines()]


def test_the_store_option_names_the_teams_valkey_server_when_runonce_store_is_unset(ops, monkeypatch):
    url = os.environ["RUNONCE_STORE"]
    ops.store.fail(ops.claim_scheduled(SCHEDULED), "upstream said 400")
    monkeypatch.delenv("RUNONCE_STORE")
    listing = ["runs", "--team", ops.team.name, "--job", "report", "--since", "5m", "--json"]
    assert _statuses(ops.run("--store", url, *listing)) == ["failed"]
    # Without it the command reads Firestore's ledger, where this team has no record.
    assert _statuses(ops.run(*listing)) == ["missing"]


def test_the_store_option_wins_over_runonce_store(ops):
    ops.store.fail(ops.claim_scheduled(SCHEDULED), "upstream said 400")
    listing = ["runs", "--team", ops.team.name, "--job", "report", "--since", "5m", "--json"]
    assert _statuses(ops.run(*listing)) == ["failed"]
    assert _statuses(ops.run("--store", "firestore", *listing)) == ["missing"]


@pytest.mark.parametrize(
    ("arguments", "variable", "named"),
    [
        (
            ["--store", "redis://ops:s3cret@10.0.0.3:6379"],
            None,
            "--store: 'redis://ops:***@10.0.0.3:6379' names no run store: use firestore (the default), "
            "or a Valkey server's URL",
        ),
        ([], "memcache://10.0.0.3", "RUNONCE_STORE: 'memcache://10.0.0.3' names no run store"),
        (["--store", "valkey://10.0.0.3:6379?replicas=x"], None, "--store: the store URL"),
    ],
)
def test_a_store_that_names_no_store_is_bad_input_naming_where_it_was_given(
    ops, monkeypatch, arguments, variable, named
):
    if variable is None:
        monkeypatch.delenv("RUNONCE_STORE")
    else:
        monkeypatch.setenv("RUNONCE_STORE", variable)
    result = ops.run(*arguments, "runs", "--team", ops.team.name)
    assert result.exit_code == 2
    assert named in result.stderr
    assert "s3cret" not in result.stderr and "Traceback" not in result.stderr
