"""The demo's proxied job: functions/proxy on real functions-framework instances and the real
Firestore emulator, calling the Google APIs stand-in, under duplicates, lost responses, dropped
target answers and an instance killed after the target started. Each run must start exactly one
workflow execution, counted from the stand-in's own records."""

from __future__ import annotations

import time

import pytest

from localscheduler.demos.proxy import FAULTS, ProxyHarness


@pytest.fixture(scope="module")
def proxied(firestore_emulator, tmp_path_factory):
    harness = ProxyHarness("runonce-local", firestore_emulator.host, tmp_path_factory.mktemp("proxy"), 10, 7)
    began = time.monotonic()
    try:
        harness.start()
        result = harness.run()
    finally:
        harness.stop()
    assert not harness.pids(), "an instance is still running"
    return result, time.monotonic() - began


def test_every_fault_is_played(proxied):
    result, _ = proxied
    assert {run.fault for run in result.runs} == set(FAULTS)


def test_one_execution_per_run(proxied):
    result, _ = proxied
    assert [len(run.executions) for run in result.runs] == [1] * len(result.runs), result.render()
    assert result.ok, result.render()


def test_the_faults_made_extra_deliveries_and_the_kill_replaced_an_instance(proxied):
    result, _ = proxied
    assert sum(len(run.answers) for run in result.runs) > len(result.runs)
    assert result.restarts >= 1
    killed = [run for run in result.runs if run.fault == "instance_killed"]
    assert all(run.answers[0].status is None and any(a.ok for a in run.answers) for run in killed)
