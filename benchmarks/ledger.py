"""`make bench`: runonce's ledger against the seed's two-transaction pattern, side by side.

One emulator, one process, the two implementations interleaved run by run so that both see the
same machine load. Prints the median store time per distinct run and the Firestore round trips
per outcome, then the ratio (target: runonce at most 0.35x the baseline, exactly two round trips
on the happy path).
"""

from __future__ import annotations

import os
import statistics
import sys
import time
import uuid
from datetime import timedelta

from benchmarks.seed_baseline import SeedLedger
from emulator.firestore import FirestoreEmulator
from emulator.wire import TappedClient, WireTap

RUNS = int(os.environ.get("BENCH_RUNS", "200"))
TARGET_RATIO = 0.35
# The emulator is a JVM: its first few hundred calls run before the JIT has compiled the hot paths.
WARMUP = int(os.environ.get("BENCH_WARMUP", "300"))


def runonce_ledger(client):
    """runonce's Firestore ledger on a collection of its own, as the benchmarks time it."""
    from runonce.store.firestore import Ledger

    return Ledger(client, f"bench_{uuid.uuid4().hex[:8]}", timedelta(minutes=10), timedelta(days=1))


def _time_runonce(ledger, key: str) -> float:
    started = time.perf_counter()
    claim = ledger.claim(key, {"job": "bench"})
    ledger.complete(claim, None)
    return time.perf_counter() - started


def _time_seed(ledger: SeedLedger, key: str) -> float:
    started = time.perf_counter()
    attempt = ledger.claim(key)
    assert attempt is not None, f"the seed ledger did not claim {key}"
    ledger.complete(key, attempt)
    return time.perf_counter() - started


def _round_trips(tap: WireTap, action) -> int:
    tap.reset()
    action()
    return tap.total()


def main() -> int:
    with FirestoreEmulator() as emulator:
        os.environ["FIRESTORE_EMULATOR_HOST"] = emulator.host
        tap = WireTap()
        client = TappedClient(tap, project="runonce-bench")
        ours = runonce_ledger(client)
        seed = SeedLedger(client, f"seed_{uuid.uuid4().hex[:8]}", timedelta(minutes=10))
        for warmup in range(WARMUP):
            _time_runonce(ours, f"warm-{warmup}")
            _time_seed(seed, f"warm-{warmup}")
        ours_ms: list[float] = []
        seed_ms: list[float] = []
        for run in range(RUNS):
            key = f"run-{run}"
            pair = [(ours_ms, _time_runonce, ours), (seed_ms, _time_seed, seed)]
            for samples, timed, ledger in pair if run % 2 else reversed(pair):
                samples.append(timed(ledger, key) * 1000)

        def held_twice(claim) -> None:
            """Claim a run, then (counting from here) claim it again while it is held."""
            claim()
            tap.reset()
            claim()

        def seed_claimed() -> None:
            attempt = seed.claim("rt-1")
            assert attempt is not None
            seed.complete("rt-1", attempt)

        trips = {
            "runonce": {
                "claimed (claim + complete)": _round_trips(
                    tap, lambda: ours.complete(ours.claim("rt-1", {}), None)
                ),
                "duplicate of completed": _round_trips(tap, lambda: ours.claim("rt-1", {})),
                "in progress": _round_trips(tap, lambda: held_twice(lambda: ours.claim("rt-2", {}))),
            },
            "seed (2 transactions)": {
                "claimed (claim + complete)": _round_trips(tap, seed_claimed),
                "duplicate of completed": _round_trips(tap, lambda: seed.claim("rt-1")),
                "in progress": _round_trips(tap, lambda: held_twice(lambda: seed.claim("rt-2"))),
            },
        }

    ours_median, seed_median = statistics.median(ours_ms), statistics.median(seed_ms)
    ratio = ours_median / seed_median
    print(f"Ledger store time per distinct run, median of {RUNS} runs each, interleaved on one emulator")
    print(f"  {'seed (2 transactions)':<24}{seed_median:8.2f} ms")
    print(f"  {'runonce':<24}{ours_median:8.2f} ms")
    print(f"  ratio runonce/seed      {ratio:8.2f}x   (target <= {TARGET_RATIO}x)")
    print("Firestore round trips per outcome")
    outcomes = list(trips["runonce"])
    print(f"  {'outcome':<30}" + "".join(f"{name:>24}" for name in trips))
    for outcome in outcomes:
        print(f"  {outcome:<30}" + "".join(f"{trips[name][outcome]:>24}" for name in trips))
    happy = trips["runonce"]["claimed (claim + complete)"]
    met = ratio <= TARGET_RATIO and happy == 2
    print(
        f"verdict: {'target met' if met else 'TARGET MISSED'} "
        f"(ratio {ratio:.2f}x, happy path {happy} round trips)"
    )
    return 0 if met else 1


if __name__ == "__main__":
    sys.exit(main())
