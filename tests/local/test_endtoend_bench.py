"""`make bench`'s process-level measurements run at a tiny size: real functions-framework processes
on the emulators (every request a completed run or a new event, a ratio printed, a profile
written) and fresh interpreters for the cold start. No timing is asserted: these machines are
shared."""

import pstats
import shutil
import subprocess
import sys
import time

import pytest

from benchmarks import coldstart, endtoend_events
from benchmarks.cpu import GroupCpu, Hog, process_seconds
from benchmarks.endtoend import (
    AGAINST,
    FASTAPI_VARIANTS,
    RUNONCE,
    SEED,
    VARIANTS,
    Measurement,
    measure,
    own_time,
    render,
    verdict,
)
from benchmarks.own_time import render as render_own


def test_the_end_to_end_benchmark_times_each_variant_and_prints_the_ratio(firestore_emulator, tmp_path):
    """The functions-framework variants and the FastAPI ones (uvicorn), every request a completed
    run, both ratios printed, the FastAPI one shown and not judged."""
    profile = tmp_path / "runonce.prof"
    result = measure(firestore_emulator.host, runs=4, warmup=2, batch=2, log_dir=tmp_path, profile=profile)
    variants = [*VARIANTS, *FASTAPI_VARIANTS]
    assert {variant: len(times) for variant, times in result.latencies.items()} == dict.fromkeys(variants, 4)
    assert result.failures == dict.fromkeys(variants, 0)
    report = render(result, batch=2)
    assert "ratio runonce overhead / seed (2 transactions) overhead" in report
    assert "ratio runonce (FastAPI) overhead over its floor / seed (2 transactions) overhead" in report
    assert "(shown, not judged: no target)" in report
    profiled = {name for _, _, name in pstats.Stats(str(profile)).stats}
    assert {"claim", "complete"} <= profiled
    assert result.hogged is None  # no hog unless asked for
    assert set(result.cpu) == set(variants)  # each instance's CPU read around its batches
    assert "ratio runonce CPU above the floor / seed (2 transactions)'s" in report


def test_the_end_to_end_benchmark_times_the_same_requests_beside_a_cpu_hog_when_asked(
    firestore_emulator, tmp_path
):
    """As many timed requests again, beside the hog, every one a completed run; the emulator's CPU
    per request read beside each instance's; the hog's ratio printed beside the quiet one."""
    result = measure(
        firestore_emulator.host,
        runs=4,
        warmup=2,
        batch=2,
        log_dir=tmp_path,
        hog=True,
        processes={"emulator": firestore_emulator.process_group},
    )
    variants = [*VARIANTS, *FASTAPI_VARIANTS]
    assert result.hogged is not None
    assert {variant: len(times) for variant, times in result.hogged.latencies.items()} == dict.fromkeys(
        variants, 4
    )
    assert result.hogged.failures == dict.fromkeys(variants, 0)
    assert all(set(spent) == {"function", "emulator"} for spent in result.cpu.values())
    report = render(result, batch=2)
    assert "Beside a CPU hog (python -c 'while True: pass')" in report
    assert report.count("ratio runonce overhead / seed (2 transactions) overhead") == 2


def _scheduled(failures: dict[str, int]) -> Measurement:
    """Latencies whose runonce overhead is 0.3x the seed's, the FastAPI one 2x, and `failures`."""
    latencies = {
        "floor": [1.0] * 3,
        SEED: [11.0] * 3,
        RUNONCE: [4.0] * 3,
        "floor (FastAPI)": [2.0] * 3,
        "runonce (FastAPI)": [22.0] * 3,
    }
    return Measurement(latencies, {**dict.fromkeys(latencies, 0), **failures})


def test_the_end_to_end_verdict_judges_the_functions_framework_variants_and_not_the_fastapi_ones():
    assert verdict(_scheduled({})) == 0  # the FastAPI ratio (2x) is shown, not judged
    assert verdict(_scheduled({"runonce (FastAPI)": 1})) == 0
    assert verdict(_scheduled({RUNONCE: 1})) == 1


def test_the_end_to_end_verdict_judges_the_quiet_ratio_and_every_request_beside_the_hog():
    slow = Measurement({**_scheduled({}).latencies, RUNONCE: [9.0] * 3}, _scheduled({}).failures)
    assert verdict(_with_hogged(_scheduled({}), slow)) == 0  # 0.8x beside the hog: shown, not judged
    assert verdict(_with_hogged(_scheduled({}), _scheduled({RUNONCE: 1}))) == 1
    assert verdict(_with_hogged(_scheduled({}), _scheduled({"runonce (FastAPI)": 1}))) == 0


def _with_hogged(quiet: Measurement, hogged: Measurement) -> Measurement:
    return Measurement(quiet.latencies, quiet.failures, quiet.baseline, quiet.cpu, hogged)


def _rounds(runonce: list[float]) -> Measurement:
    """Ten rounds of two requests per variant, round k's all k times slower (its load); runonce's
    request in each round as `runonce` gives it (k-fold), the floor 1 ms, the seed 11 ms."""
    loads = [k for k in range(1, 11) for _ in range(2)]
    latencies = {
        "floor": [1.0 * k for k in loads],
        SEED: [11.0 * k for k in loads],
        RUNONCE: [ms * k for ms, k in zip(runonce * 10, loads, strict=True)],
    }
    return Measurement(latencies, dict.fromkeys(latencies, 0), batch=2)


def test_the_ratio_s_interval_draws_whole_rounds_so_a_load_shared_by_a_round_moves_nothing():
    """Every round's ratio is 0.3x whatever its load: drawn again round by round, always 0.3x (drawn
    request by request, the rounds' loads would mix and the interval would widen)."""
    low, high = _rounds([4.0, 4.0]).interval()
    assert (low, high) == pytest.approx((0.3, 0.3))


def test_the_ratio_s_interval_widens_with_the_spread_of_runonce_s_own_requests():
    low, high = _rounds([2.0, 6.0]).interval()
    assert low < 0.3 < high


def test_the_against_variant_is_printed_beside_runonce_and_never_judged():
    latencies = {"floor": [1.0] * 3, SEED: [11.0] * 3, RUNONCE: [4.0] * 3, AGAINST: [5.0] * 3}
    cpu = {
        name: {"function": ms, "emulator": 0.0}
        for name, ms in (("floor", 1.0), (SEED, 9.0), (RUNONCE, 3.0), (AGAINST, 4.0))
    }
    result = Measurement(latencies, {**dict.fromkeys(latencies, 0), AGAINST: 3}, cpu=cpu)
    report = render(result, batch=1)
    assert (
        "ratio runonce (--against) overhead / seed (2 transactions) overhead  0.40x at the median" in report
    )
    assert "runonce's overhead over its 0.75x at the median" in report
    assert "ratio runonce CPU above the floor / runonce (--against)'s  0.67x" in report
    assert verdict(result) == 0  # its failures are shown, not judged


def test_a_run_too_short_to_read_the_baselines_cpu_above_the_floor_says_so_instead_of_dividing_by_it():
    latencies = {"floor": [1.0] * 3, SEED: [11.0] * 3, RUNONCE: [4.0] * 3}
    cpu = {name: {"function": 2.5, "emulator": 0.0} for name in latencies}  # one clock tick each
    report = render(Measurement(latencies, dict.fromkeys(latencies, 0), cpu=cpu), batch=1)
    assert "ratio runonce CPU above the floor / seed (2 transactions)'s  n/a: " in report
    assert "ratio runonce overhead / seed (2 transactions) overhead  0.30x at the median" in report


def test_the_end_to_end_benchmark_serves_runonce_from_another_revision_when_asked(
    firestore_emulator, tmp_path
):
    result = measure(firestore_emulator.host, runs=2, warmup=1, batch=1, log_dir=tmp_path, against="HEAD")
    assert len(result.latencies[AGAINST]) == 2 and result.failures[AGAINST] == 0


def test_the_hog_burns_cpu_while_running_and_none_while_paused():
    with Hog() as hog:
        pid = hog.pid
        spent = lambda: process_seconds(pid) or 0.0  # noqa: E731
        assert _still(spent)  # paused from the start (its interpreter may have started first)
        hog.run(True)
        started = spent()
        deadline = time.monotonic() + 30
        while spent() == started and time.monotonic() < deadline:
            time.sleep(0.05)
        assert spent() > started
        hog.run(False)
        assert _still(spent)
    assert process_seconds(pid) is None  # killed and reaped on leaving


def _still(spent) -> bool:
    """No CPU spent over 0.3 s, once a tick the last signal may still add is counted."""
    time.sleep(0.1)
    before = spent()
    time.sleep(0.3)
    return spent() == before


def test_group_cpu_adds_up_the_cpu_of_a_process_group():
    burner = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys, time\nend = time.process_time() + 0.2\n"
            "while time.process_time() < end: pass\nsys.stdin.read()",
        ],
        stdin=subprocess.PIPE,
        start_new_session=True,
    )
    try:
        meter = GroupCpu(burner.pid)
        deadline = time.monotonic() + 30
        while meter.seconds() < 0.2 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert meter.seconds() >= 0.2  # its 0.2 s of burning, and its start-up
    finally:
        burner.kill()
        burner.wait()
    with pytest.raises(ValueError, match="no process in process group"):
        GroupCpu(burner.pid)


def test_the_event_end_to_end_benchmark_times_each_variant_and_prints_the_ratio(
    firestore_emulator, pubsub_emulator, tmp_path
):
    result = endtoend_events.measure(
        firestore_emulator.host, pubsub_emulator.host, runs=4, warmup=2, batch=2, log_dir=tmp_path
    )
    variants = endtoend_events.VARIANTS
    assert {variant: len(times) for variant, times in result.latencies.items()} == dict.fromkeys(variants, 4)
    assert result.failures == dict.fromkeys(variants, 0)
    assert result.baseline == endtoend_events.TRANSACTION
    assert "ratio runonce overhead / transaction (event id) overhead" in render(result, 2, 0.45)


def test_the_cold_start_benchmark_times_both_imports_in_fresh_processes_and_prints_the_ratio():
    result = coldstart.measure(samples=2, warmup=1)
    assert {variant: len(times) for variant, times in result.times.items()} == dict.fromkeys(
        coldstart.VARIANTS, 2
    )
    assert "ratio runonce / baseline" in coldstart.render(result)


@pytest.mark.skipif(
    shutil.which("valgrind") is None, reason="valgrind is not installed: apt-get install valgrind"
)
def test_the_cold_start_benchmark_counts_each_variants_instructions_the_same_way_each_run():
    counted = coldstart.count_instructions(runs=1)
    assert counted.counts is not None
    baseline, runonce = counted.counts[coldstart.BASELINE][0], counted.counts[coldstart.RUNONCE][0]
    assert baseline > 100_000_000  # an interpreter with functions_framework and firestore imported
    assert runonce > baseline  # runonce imports the baseline's libraries, and its own modules
    assert "ratio runonce / baseline" in coldstart.render_counts(counted)


def _wall(ratio: float) -> coldstart.Measurement:
    """A wall-time measurement of 100 pairs whose paired ratios spread 0.9-1.1 around `ratio`."""
    baseline = [100.0] * 100
    return coldstart.Measurement(
        {
            coldstart.BASELINE: baseline,
            coldstart.RUNONCE: [100.0 * (ratio - 0.1 + n / 500) for n in range(100)],
        }
    )


def _counted(*ratios: float) -> coldstart.Counted:
    return coldstart.Counted(
        {coldstart.BASELINE: [1000] * len(ratios), coldstart.RUNONCE: [round(1000 * r) for r in ratios]}
    )


def test_the_cold_start_verdict_needs_every_runs_instruction_ratio_under_the_target():
    assert coldstart.verdict(_wall(1.04), _counted(1.03, 1.03)) == "met"
    assert coldstart.verdict(_wall(1.06), _counted(1.03, 1.05)) == "met"  # the count decides, not the load
    assert coldstart.verdict(_wall(1.04), _counted(1.03, 1.051)) == "missed"  # one count over it


def test_without_valgrind_the_cold_start_verdict_takes_the_wall_times_interval():
    none = coldstart.Counted(None)
    assert coldstart.verdict(_wall(1.04), none) == "undecided"  # its interval holds 1.05
    assert coldstart.verdict(_wall(0.99), none) == "met"
    assert coldstart.verdict(_wall(1.11), none) == "missed"
    assert "valgrind is not installed" in coldstart.render_counts(none)


def test_the_event_benchmarks_store_floor_times_both_store_calls(firestore_emulator, monkeypatch):
    """Each call must find a new event (a claim, a first time): the calls assert it."""
    monkeypatch.setenv("FIRESTORE_EMULATOR_HOST", firestore_emulator.host)  # restored after the test
    ours, pattern = endtoend_events.store_floor(firestore_emulator.host, runs=3, warmup=1)
    assert ours > 0 and pattern > 0


def test_the_scheduled_benchmark_times_each_handlers_own_time_beside_its_store_calls(
    firestore_emulator, monkeypatch
):
    """Every delivery a completed run (the handlers would answer otherwise), its store calls timed."""
    monkeypatch.setenv("FIRESTORE_EMULATOR_HOST", firestore_emulator.host)  # restored after the test
    result = own_time(firestore_emulator.host, runs=3, warmup=1)
    assert {variant: len(times) for variant, times in result.wall.items()} == {SEED: 3, RUNONCE: 3}
    assert all(
        0 < store < wall
        for variant in result.wall
        for wall, store in zip(result.wall[variant], result.store[variant], strict=True)
    )
    assert "ratio runonce own time / seed (2 transactions) own time" in render_own(result, SEED, 3)


def test_the_event_benchmark_times_each_handlers_own_time_beside_its_store_calls(
    firestore_emulator, pubsub_emulator, monkeypatch
):
    monkeypatch.setenv("FIRESTORE_EMULATOR_HOST", firestore_emulator.host)
    monkeypatch.setenv("PUBSUB_EMULATOR_HOST", pubsub_emulator.host)
    result = endtoend_events.own_time(firestore_emulator.host, pubsub_emulator.host, runs=3, warmup=1)
    assert {variant: len(times) for variant, times in result.wall.items()} == {
        endtoend_events.TRANSACTION: 3,
        "runonce": 3,
    }
    assert all(
        0 < store < wall
        for variant in result.wall
        for wall, store in zip(result.wall[variant], result.store[variant], strict=True)
    )
