"""`make bench`'s end-to-end measurement runs at a tiny size: real functions-framework processes on
the emulator, every request a completed run, a ratio printed, a profile written. No timing is
asserted: these machines are shared."""

import pstats

from benchmarks.endtoend import VARIANTS, measure, render


def test_the_end_to_end_benchmark_times_each_variant_and_prints_the_ratio(firestore_emulator, tmp_path):
    profile = tmp_path / "runonce.prof"
    result = measure(firestore_emulator.host, runs=4, warmup=2, batch=2, log_dir=tmp_path, profile=profile)
    assert {variant: len(times) for variant, times in result.latencies.items()} == dict.fromkeys(VARIANTS, 4)
    assert result.failures == dict.fromkeys(VARIANTS, 0)
    assert "ratio runonce overhead / seed overhead" in render(result, batch=2)
    profiled = {name for _, _, name in pstats.Stats(str(profile)).stats}
    assert {"claim", "complete"} <= profiled
