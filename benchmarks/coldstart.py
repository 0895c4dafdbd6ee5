"""`make bench`, cold start: the process wall time of a scheduled function's imports, runonce's
against the two libraries any Firestore-backed function loads.

Each sample is a fresh `python -c` (interpreter start-up included, as in a new instance), with
the environment a function instance has here (the PYTHONPATH of `localscheduler.instances`, a
project id); it ends right after the imports, as an instance does not exit either. The variants
alternate sample by sample, the first one swapped every round, so both see the same machine load.
Both read their bytecode from one private cache (PYTHONPYCACHEPREFIX, filled by untimed warm-up
samples), so neither pays for compiling its sources and nothing is written into the tree.
Target: runonce's median at most 1.05x the baseline's.
"""

from __future__ import annotations

import argparse
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
        """runonce's median over the baseline's: the figure with the target."""
        return self.median(RUNONCE) / self.median(BASELINE)

    @property
    def paired_ratio(self) -> float:
        """Median of runonce's time over the baseline's in the same round: steadier under shifting load."""
        return statistics.median(
            r / b for r, b in zip(self.times[RUNONCE], self.times[BASELINE], strict=True)
        )


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
    lines.append(
        f"  ratio runonce / baseline  {result.ratio:.3f}x of the medians (target <= {TARGET_RATIO}x), "
        f"{result.paired_ratio:.3f}x the median of the ratios round by round"
    )
    return "\n".join(lines)


def arguments(argv: list[str] | None = None) -> argparse.Namespace:
    """Sizes of the measurement; the defaults take about a minute (100 samples a variant: with
    fewer, the machine's load moves the median by as much as the 5% the target allows)."""
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.coldstart", description=__doc__.splitlines()[0]
    )
    parser.add_argument("--samples", type=int, default=100, help="timed processes per variant (default 100)")
    parser.add_argument(
        "--warmup", type=int, default=3, help="untimed processes per variant first (default 3, at least 1)"
    )
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    """Measure, print; exit 1 if the ratio misses the target."""
    args = arguments(argv)
    result = measure(args.samples, args.warmup)
    print(render(result))
    met = result.ratio <= TARGET_RATIO
    print(f"verdict: {'target met' if met else 'TARGET MISSED'} (ratio {result.ratio:.3f}x)")
    return 0 if met else 1


if __name__ == "__main__":
    sys.exit(main())
