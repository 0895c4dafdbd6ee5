"""`make bench`'s Valkey store part (benchmarks/valkey.py) on a real server: the round trips it
prints per outcome are the ones runonce and Powertools' pattern take, every side's runs are timed
and its CPU and command time read, and the verdict follows the ratio."""

from __future__ import annotations

import pytest

from benchmarks.valkey import SIDES, StoreTimes, event_round_trips, render, round_trips, store_times, verdict
from tests.store.valkey_server import ValkeyServer


@pytest.fixture(scope="module")
def server():
    running = ValkeyServer()
    yield running
    running.stop()


def test_the_round_trips_per_outcome_are_runonces_and_the_patterns(server):
    trips = round_trips(server.port)
    assert trips == {
        "runonce": {
            "claimed (claim + complete)": 2,
            "duplicate of completed": 1,
            "in progress": 1,
            "failed (claim + fail)": 2,
        },
        "Powertools (SET NX, SET)": {
            "claimed (claim + complete)": 2,
            "duplicate of completed": 2,
            "in progress": 2,
            "failed (claim + fail)": 2,
        },
    }


def test_an_events_round_trips_are_two_on_the_happy_path_and_one_for_a_duplicate(server):
    assert event_round_trips(server.port) == {
        "completed (claim + complete)": (2, "completed"),
        "duplicate of a completed event": (1, "duplicate"),
        "retryable failure (claim + release)": (2, "retry"),
        "its redelivery, completed": (2, "completed"),
    }


def test_every_side_is_timed_run_by_run_with_its_cpu_and_its_commands_time(server):
    times = store_times(server.port, server.pid, runs=40, warmup=20)
    assert {side: len(samples) for side, samples in times.times.items()} == dict.fromkeys(SIDES, 40)
    assert all(times.command_us[side] > 0 for side in SIDES)  # each side's one command ran on the server
    assert all(times.client_cpu_us[side] > 0 for side in SIDES)
    report = render(times, round_trips(server.port), 40)
    assert all(name in report for name in SIDES.values()) and "target <= 1.1x" in report


@pytest.mark.parametrize(("runonce_ms", "met"), [(0.105, True), (0.2, False)])
def test_the_verdict_is_met_only_at_most_at_1_1_times_the_pattern(server, capsys, runonce_ms, met):
    times = StoreTimes(
        {"runonce": [runonce_ms], "pattern": [0.1], "floor": [0.1]},
        dict.fromkeys(SIDES, 1.0),
        dict.fromkeys(SIDES, 1.0),
        dict.fromkeys(SIDES, 1.0),
    )
    assert verdict(times, round_trips(server.port)) == (0 if met else 1)
    assert ("target met" if met else "TARGET MISSED") in capsys.readouterr().out
