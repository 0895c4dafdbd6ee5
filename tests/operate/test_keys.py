"""Short run keys: `runonce runs` shows each key's shortest unique prefix (12 characters at
least), `show` and `release` take it as git takes a short hash, an ambiguous one exits 2 listing
the candidates, and `--json` keeps the whole key."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest

from operate.keys import SHORT_KEY, short_keys
from runonce.contract import ACTIONS_FIELD
from tests.conftest import SCHEDULED
from tests.operate.conftest import LEASE, ON_BOTH_STORES, deployed


@pytest.fixture(params=ON_BOTH_STORES)
def ledger_kind(request) -> str:
    """Every test here runs on a team on Firestore and on a team on Valkey."""
    return request.param


LONG_NAMES = """
    jobs=[
        Job(name="nightly-billing-report", schedule="*/10 * * * *", source="report"),
        Job(name="reconcile-ledgers-eu", schedule="*/10 * * * *", source="report"),
    ],
"""


def test_short_keys_are_the_shortest_unique_prefixes_of_at_least_12_characters():
    keys = ["abcdef0123456789", "abcdef0123456799", "ffff000011112222"]
    assert short_keys(keys) == {
        "abcdef0123456789": "abcdef0123456789"[:15],
        "abcdef0123456799": "abcdef0123456799"[:15],
        "ffff000011112222": "ffff00001111",
    }
    assert short_keys(["abc", "abcdef0123456789"]) == {"abc": "abc", "abcdef0123456789": "abcdef012345"}


def test_the_runs_table_fits_120_columns_with_one_line_per_run_and_its_short_key(
    ops, served, clock, monkeypatch
):
    team_file = next(iter(__import__("pathlib").Path(ops.folder).glob("t*.py")))
    text = team_file.read_text()
    start = text.index("    jobs=[")
    end = text.index("    event_jobs=[")
    team_file.write_text(text[:start] + LONG_NAMES + text[end:])
    ops.team = __import__("operate.team", fromlist=["resolve"]).resolve(ops.team.name)
    deployed(ops.api, ops.team)  # `runs` reads each job's state: ENABLED, no line above the table
    clock.current = SCHEDULED - timedelta(minutes=4, seconds=30)
    served.force("nightly-billing-report")
    clock.current = SCHEDULED + timedelta(seconds=5)
    served.deliver("reconcile-ledgers-eu", SCHEDULED)
    served.behaviour = lambda: (_ for _ in ()).throw(__import__("runonce").PermanentError("no"))
    served.deliver("nightly-billing-report", SCHEDULED)
    monkeypatch.setenv("COLUMNS", "120")
    result = ops.run("runs", "--team", ops.team.name, "--since", "30m")
    assert result.exit_code == 0, result.stderr
    lines = result.stdout.splitlines()
    assert max(len(line) for line in lines) <= 120, result.stdout
    rows = [
        json.loads(line)
        for line in ops.run("runs", "--team", ops.team.name, "--since", "30m", "--json").stdout.splitlines()
    ]
    recorded = [row for row in rows if row["status"] != "missing"]
    assert len(recorded) == 3 and all(len(row["key"]) == 64 for row in rows)
    for row in rows:
        # One line per run: its job, its time and (if it has a record) its short key together.
        found = [line for line in lines if row["time"][11:19] in line and row["job"] in line]
        assert len(found) == 1, (row, result.stdout)
        [line] = found
        assert (row["key"][:SHORT_KEY] in line) == (row["status"] != "missing")


def test_a_short_key_round_trips_through_show_and_release(ops, clock):
    claim = ops.claim_scheduled(SCHEDULED)
    clock.advance(LEASE.total_seconds() + 5)
    short = claim.key[:SHORT_KEY]
    shown = json.loads(ops.run("show", short, "--team", ops.team.name).stdout)
    assert shown["key"] == claim.key and shown["record"]["attempt_id"] == claim.attempt_id
    assert shown["next"][0]["command"] == f"runonce release {claim.key} --team {ops.team.name}"
    released = ops.run("release", short, "--team", ops.team.name, "--by", "tester")
    assert released.exit_code == 0, released.stderr
    assert ops.store.read(claim.key)[ACTIONS_FIELD][0]["action"] == "release"


def test_an_ambiguous_short_key_exits_2_listing_the_candidates_and_changes_nothing(ops, clock):
    fields = {"event_kind": "pubsub", "event_source": ops.team.event_jobs[0].push_subscription}
    for key in ("abcdef0123456789aa", "abcdef0123456789bb"):
        ops.store.claim(key, fields)
    clock.advance(LEASE.total_seconds() + 5)
    for verb in (["show"], ["release", "--by", "tester"]):
        result = ops.run(verb[0], "abcdef0123456789", "--team", ops.team.name, *verb[1:])
        assert result.exit_code == 2, result.output
        assert (
            "KEY" in result.stderr
            and "abcdef0123456789aa" in result.stderr
            and "abcdef0123456789bb" in result.stderr
        )
    assert all(ACTIONS_FIELD not in record for record in ops.store.find({}).values())
    one = ops.run("release", "abcdef0123456789a", "--team", ops.team.name, "--by", "tester")
    assert one.exit_code == 0 and ACTIONS_FIELD in ops.store.read("abcdef0123456789aa")


def test_a_short_key_that_starts_no_record_is_refused_by_release_and_shown_as_no_record(ops):
    release = ops.run("release", "0123456789ab", "--team", ops.team.name, "--by", "tester")
    assert release.exit_code == 2 and "KEY" in release.stderr
    shown = json.loads(ops.run("show", "0123456789ab", "--team", ops.team.name).stdout)
    assert shown["record"] is None and shown["next"][0]["command"] is None
