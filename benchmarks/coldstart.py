"""`make bench`, cold start: the process wall time of a scheduled function's imports, runonce's
against the two libraries any Firestore-backed function loads.

Each sample is a fresh `python -c` (interpreter start-up included, as in a new instance), with
the environment a function instance has here (the PYTHONPATH of `localscheduler.hosts.pool`, a
project id); it ends right after the imports, as an instance does not exit either. The variants
alternate sample by sample, the first one swapped every round, so both see the same machine load.
Both read their bytecode from one private cache (PYTHONPYCACHEPREFIX, filled by untimed warm-up
samples), so neither pays for compiling its sources and nothing is written into the tree.
Target: runonce's time at most 1.05x the baseline's, judged on the median of the paired ratios
(round by round) with its 95% confidence interval: met only when the whole interval is under it.
"""

from __future__ import annotations

import argparse
import math
import os
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]

BASELINE, RUNONCE = "functions_framework + google.cloud.firestore", "functions_framework + runonce"
# An instance never exits during its cold start: each sample ends right after its imports, without
# the interpreter's teardown (about 70 ms here, and the noisiest part of a sample).
_END = "import os\nos._exit(0)\n"
# What a scheduled function's main.py runs at import (functions/report/main.py): the imports and
# the decoration; the ledger itself is built at the first request.
VARIANTS = {
    BASELINE: "import functions_framework, google.cloud.firestore\n" + _END,
    RUNONCE: (
        "import functions_framework, runonce\n"
        "from runonce import deduplicated\n"
        "@functions_framework.http\n"
        "@deduplicated\n"
        "def handle(request):\n"
        "    return {}\n" + _END
    ),
}
TARGET_RATIO = 1.05
PROJECT = "runonce-bench"


@dataclass(frozen=True)
class Measurement:
    """Wall times in ms per variant (warm-up excluded)."""

    times: dict[str, list[float]]

    def median(self, variant: str) -> float:
        """Median wall time of one variant, ms."""
        return statistics.median(self.times[variant])

    @property
    def ratio(self) -> float:
        """runonce's median over the baseline's."""
        return self.median(RUNONCE) / self.median(BASELINE)

    @property
    def paired(self) -> list[float]:
        """runonce's time over the baseline's in the same round, sorted: each pair saw the same load."""
        return sorted(r / b for r, b in zip(self.times[RUNONCE], self.times[BASELINE], strict=True))

    @property
    def paired_ratio(self) -> float:
        """Median of the paired ratios: the figure with the target (load that shifts between rounds
        moves both samples of a round, not their ratio)."""
        return statistics.median(self.paired)

    @property
    def interval(self) -> tuple[float, float]:
        """A 95% confidence interval of the median paired ratio, distribution-free: the order
        statistics n/2 -+ 1.96 sqrt(n)/2 of the sorted ratios (the binomial's normal approximation)."""
        ratios = self.paired
        n = len(ratios)
        half = 1.96 * math.sqrt(n) / 2
        low, high = max(0, math.floor(n / 2 - half)), min(n - 1, math.ceil(n / 2 + half) - 1)
        return ratios[low], ratios[high]

    def verdict(self, target: float = TARGET_RATIO) -> str:
        """`met` if the whole interval is at or under the target, `missed` if it is all above,
        `undecided` if the target lies inside it (more samples would decide)."""
        low, high = self.interval
        return "met" if high <= target else "missed" if low > target else "undecided"


def _environment(cache: str) -> dict[str, str]:
    env = {
        key: value
        for key, value in os.environ.items()
        if key not in {"PYTHONDONTWRITEBYTECODE", "FUNCTION_TARGET", "FUNCTION_SIGNATURE_TYPE"}
    }
    env.update(
        {
            "PYTHONPATH": os.pathsep.join([str(REPO_ROOT), str(REPO_ROOT / "functions")]),
            "PYTHONPYCACHEPREFIX": cache,
            "GOOGLE_CLOUD_PROJECT": PROJECT,
        }
    )
    return env


def _sample(code: str, env: dict[str, str]) -> float:
    started = time.perf_counter()
    subprocess.run([sys.executable, "-c", code], env=env, cwd=REPO_ROOT, check=True, stdin=subprocess.DEVNULL)
    return (time.perf_counter() - started) * 1000


def measure(samples: int, warmup: int) -> Measurement:
    """`samples` timed processes per variant after `warmup` untimed ones each, interleaved."""
    times: dict[str, list[float]] = {variant: [] for variant in VARIANTS}
    names = list(VARIANTS)
    with tempfile.TemporaryDirectory(prefix="runonce-coldstart-") as cache:
        env = _environment(cache)
        for round_ in range(max(1, warmup) + samples):
            for variant in names if round_ % 2 == 0 else names[::-1]:
                ms = _sample(VARIANTS[variant], env)
                if round_ >= max(1, warmup):  # the first round fills the bytecode cache
                    times[variant].append(ms)
    return Measurement(times)


def render(result: Measurement) -> str:
    """The report: each variant's median and spread, the ratio against the target."""
    count = len(result.times[BASELINE])
    lines = [
        f"Cold start: process wall time of a fresh `python -c`, median of {count} interleaved samples each",
        f"  {'imports':<48}{'median':>10}{'min':>10}{'max':>10}",
    ]
    for variant, times in result.times.items():
        lines.append(
            f"  {variant:<48}{result.median(variant):7.1f} ms{min(times):7.1f} ms{max(times):7.1f} ms"
        )
    low, high = result.interval
    lines.append(
        f"  ratio runonce / baseline  {result.paired_ratio:.3f}x the median of the ratios round by round, "
        f"95% interval {low:.3f}-{high:.3f}x (target <= {TARGET_RATIO}x); {result.ratio:.3f}x of the medians"
    )
    return "\n".join(lines)


def arguments(argv: list[str] | None = None) -> argparse.Namespace:
    """Sizes of the measurement; the defaults take a few minutes (300 samples a variant: with 100,
    the confidence interval of the median paired ratio was several percent wide on a busy machine)."""
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.coldstart", description=__doc__.splitlines()[0]
    )
    parser.add_argument("--samples", type=int, default=300, help="timed processes per variant (default 300)")
    parser.add_argument(
        "--warmup", type=int, default=3, help="untimed processes per variant first (default 3, at least 1)"
    )
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    """Measure, print; exit 1 if the ratio misses the target."""
    args = arguments(argv)
    result = measure(args.samples, args.warmup)
    print(render(result))
    decided = result.verdict()
    words = {"met": "target met", "missed": "TARGET MISSED", "undecided": "TARGET NOT SHOWN MET"}
    print(f"verdict: {words[decided]} (median paired ratio {result.paired_ratio:.3f}x, interval {decided})")
    return 0 if decided == "met" else 1


if __name__ == "__main__":
    sys.exit(main())
