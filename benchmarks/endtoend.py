"""`make bench`, end to end: a request over HTTP to a real functions-framework process, three ways.

Each variant of benchmarks.endtoend_functions (no deduplication, the seed's two transactions,
runonce) is served by its own functions-framework process (gunicorn, one worker, one thread:
Cloud Run with concurrency 1) started the way the local scheduler starts its instances, all on
one Firestore emulator. The client sends Scheduler's headers with a new ScheduleTime per request
(every request is a distinct run on the happy path), in batches that rotate through the variants
so that all three see the same machine load. It prints each variant's median latency, the
overhead above the floor, and the ratio of runonce's overhead to the seed's (target <= 0.4x), and
the same at the 10th percentile: on a shared machine, the requests least disturbed by other load.

Two FastAPI variants join the same rotation (benchmarks.endtoend_fastapi), each served by its own
uvicorn process: the job body with no deduplication, its floor, and under runonce's ASGI
`@deduplicated`. Their row's ratio (FastAPI runonce's overhead above its own floor over the
seed's overhead above the functions-framework floor) is printed, not judged: issue 24 sets no
target for it. The verdict judges the functions-framework variants alone, as before.

As many timed rounds again run beside a CPU hog (`benchmarks.cpu.Hog`, every other round, the
bench starting and stopping it itself; `--no-hog` skips them), and their ratio is printed under
the quiet one, shown, not judged. Each variant's CPU per request in its own instance (every
thread) and in the emulator is read around its batches of the quiet rounds and printed, with
runonce's above the floor over the seed's.

`python -m benchmarks.endtoend --profile out.prof` also runs runonce's handler under cProfile in
its process and writes the statistics there (the timings then include the profiler's cost).

`--against REV` serves runonce a second time, from the library of git revision REV (its
`functions/` exported to a temporary folder, first on the instance's path), in the same rotation:
a change to the library measured side by side with the code before it, on the same machine load.
Its row is shown, not judged, with its overhead, its CPU above the floor, and runonce's over it.
"""

from __future__ import annotations

import argparse
import io
import os
import random
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path

import requests

from benchmarks import own_time as own
from benchmarks.cpu import HOG, GroupCpu, Hog
from benchmarks.own_time import OwnTimes, StoreClock, TimedClient
from emulator.firestore import FirestoreEmulator
from localscheduler.hosts.functions_framework import FunctionsFramework
from localscheduler.hosts.pool import InstancePool
from localscheduler.hosts.uvicorn import Uvicorn
from localscheduler.scheduler.delivery import rfc3339
from stacks.team import REPO_ROOT

FUNCTIONS = Path(__file__).with_name("endtoend_functions.py")
FASTAPI_APPS = Path(__file__).with_name("endtoend_fastapi.py")
VARIANTS = {"floor": "floor", "seed (2 transactions)": "seed_pattern", "runonce": "deduplicated_job"}
SEED, RUNONCE = "seed (2 transactions)", "runonce"
FASTAPI_FLOOR, FASTAPI = "floor (FastAPI)", "runonce (FastAPI)"
FASTAPI_VARIANTS = {FASTAPI_FLOOR: "floor", FASTAPI: "deduplicated_job"}
FLOORS = {FASTAPI: FASTAPI_FLOOR}
"""The floor of each variant served another way than the functions-framework floor."""
AGAINST = "runonce (--against)"
"""runonce served from the library of another revision (`--against`)."""
SHOWN = (FASTAPI_FLOOR, FASTAPI, AGAINST)
"""Variants printed and not judged: the verdict ignores their answers, as no target names them."""
TARGET_RATIO = 0.4
PROJECT = "runonce-bench"


@dataclass(frozen=True)
class Measurement:
    """Latencies in ms per variant (warm-up excluded), and what the answers said."""

    latencies: dict[str, list[float]]
    failures: dict[str, int]
    """Requests per variant not answered 200 with the happy-path outcome."""
    baseline: str = SEED
    """The variant runonce is compared with."""
    cpu: dict[str, dict[str, float]] = field(default_factory=dict)
    """Per variant, CPU ms per request of each process group measured ("function": the variant's
    own instance, every thread; "emulator"): time the processes spent while that variant's
    batches ran, over its requests."""
    hogged: Measurement | None = None
    """The same variants' requests in the rounds run beside a CPU hog, interleaved with these."""
    batch: int = 1
    """Requests per variant in a round: round r's are `latencies[variant][r * batch:(r + 1) * batch]`."""

    def median(self, variant: str) -> float:
        """Median latency of one variant, ms."""
        return statistics.median(self.latencies[variant])

    def p10(self, variant: str) -> float:
        """10th percentile latency of one variant, ms: its requests least disturbed by other load."""
        return statistics.quantiles(self.latencies[variant], n=10)[0]

    def overhead(self, variant: str, at=median) -> float:
        """Latency above its floor's (median, or `at` another statistic), ms."""
        return at(self, variant) - at(self, FLOORS.get(variant, "floor"))

    def ratio_at(self, at=median, variant: str = RUNONCE) -> float:
        """runonce's overhead (or `variant`'s) above its floor over the baseline's above the floor."""
        return self.overhead(variant, at) / self.overhead(self.baseline, at)

    @property
    def ratio(self) -> float:
        """runonce's median overhead above the floor over the baseline's: the figure with the target."""
        return self.ratio_at()

    def interval(self, at=median, variant: str = RUNONCE, draws: int = 2000) -> tuple[float, float]:
        """A 95% bootstrap interval of `ratio_at(at, variant)`: the timed rounds drawn again with
        replacement, each with every variant's batch of that round (they saw the same load), so
        it tells how far the ratio could move with the same machine and other draws of its rounds."""
        rounds = len(self.latencies["floor"]) // self.batch
        names = {variant, self.baseline, FLOORS.get(variant, "floor"), "floor"}
        draw = random.Random(0)  # the same interval for the same latencies
        ratios = []
        for _ in range(draws):
            picked = [draw.randrange(rounds) for _ in range(rounds)]
            drawn = {
                name: [
                    ms for r in picked for ms in self.latencies[name][r * self.batch : (r + 1) * self.batch]
                ]
                for name in names
            }
            ratios.append(Measurement(drawn, {}, self.baseline).ratio_at(at, variant))
        ratios.sort()
        return ratios[round(0.025 * draws)], ratios[round(0.975 * draws) - 1]

    def cpu_overhead(self, variant: str) -> float:
        """CPU ms per request of `variant` above its floor's, every measured process added up."""
        floor = FLOORS.get(variant, "floor")
        return sum(self.cpu[variant].values()) - sum(self.cpu[floor].values())


class _Library(FunctionsFramework):
    """functions-framework, with runonce loaded from the library folder `functions` first."""

    def __init__(self, functions: Path):
        self.functions = functions

    def environment(self, source: Path, target: str) -> dict[str, str]:
        path = os.pathsep.join([str(self.functions), str(REPO_ROOT)])
        return {**super().environment(source, target), "PYTHONPATH": path}


def against_pool(
    revision: str, name: str, source: Path, target: str, env: dict[str, str], log_dir: Path
) -> InstancePool:
    """One instance serving `target` of `source` with runonce's library as of git `revision`."""
    archive = subprocess.run(
        ["git", "-C", str(REPO_ROOT), "archive", revision, "functions"], capture_output=True, check=True
    ).stdout
    folder = Path(tempfile.mkdtemp(prefix="runonce-against-"))
    with tarfile.open(fileobj=io.BytesIO(archive)) as tree:
        tree.extractall(folder, filter="data")
    return InstancePool(name, source, target, 1, env, log_dir, _Library(folder / "functions"))


def _happy(variant: str, response: requests.Response) -> bool:
    if response.status_code != 200:
        return False
    body = response.json()
    return variant in ("floor", FASTAPI_FLOOR) or body.get("outcome") == "completed"


Send = Callable[[requests.Session, str, str], requests.Response]
"""Sends one happy-path request (a new run or event) to a variant: session, variant, its URL."""


def interleaved(
    pools: dict[str, InstancePool],
    send: Send,
    runs: int,
    warmup: int,
    batch: int,
    baseline: str = SEED,
    after: Callable[[requests.Session, dict[str, str]], None] | None = None,
    hog: bool = False,
    processes: dict[str, int] | None = None,
) -> Measurement:
    """Start the pools, time `runs` requests per variant after `warmup` of each, stop the pools.

    Requests go in batches of `batch` per variant, the first variant rotating every round, so
    that every variant sees the same machine load. With `hog`, as many rounds again run beside a
    CPU hog (`benchmarks.cpu.Hog`), every other round, and go to the result's `hogged`. The CPU
    time of each variant's instance, and of each process group in `processes` (name: group id,
    an emulator), is read around every batch of the quiet rounds. `after` gets the session and
    the URLs once the timed requests are done, before the pools stop.
    """
    quiet = _Rounds(pools)
    hogged = _Rounds(pools)
    try:
        for pool in pools.values():
            pool.start()
        urls = {variant: pool.instances[0].url for variant, pool in pools.items()}
        groups = {variant: GroupCpu(pool.pids()[0]) for variant, pool in pools.items()}
        shared = {name: GroupCpu(group) for name, group in (processes or {}).items()}
        with requests.Session() as session, Hog() as cpu_hog:
            session.trust_env = False
            names = list(pools)
            warm_rounds = -(-warmup // batch)
            timed_rounds = max(1, -(-runs // batch)) * (2 if hog else 1)
            for round_ in range(warm_rounds + timed_rounds):
                timed = round_ >= warm_rounds
                beside_hog = hog and timed and (round_ - warm_rounds) % 2 == 1
                cpu_hog.run(beside_hog)
                rounds = hogged if beside_hog else quiet
                order = names[round_ % len(names) :] + names[: round_ % len(names)]
                for variant in order:
                    meters = {"function": groups[variant], **shared}
                    before = {name: meter.seconds() for name, meter in meters.items()}
                    for _ in range(batch):
                        started = time.perf_counter()
                        response = send(session, variant, urls[variant])
                        ms = (time.perf_counter() - started) * 1000
                        if timed:
                            rounds.record(variant, ms, _happy(variant, response))
                    if timed and not beside_hog:
                        for name, meter in meters.items():
                            quiet.cpu[variant][name] = (
                                quiet.cpu[variant].get(name, 0.0) + meter.seconds() - before[name]
                            )
            cpu_hog.run(False)
            if after is not None:
                after(session, urls)
    finally:
        for pool in pools.values():
            pool.stop()
    hogged_rounds = hogged.measurement(baseline, None, batch) if hog else None
    return quiet.measurement(baseline, hogged_rounds, batch)


class _Rounds:
    """What the timed rounds of one kind (quiet, or beside the hog) gathered."""

    def __init__(self, pools: dict[str, InstancePool]):
        self.latencies: dict[str, list[float]] = {variant: [] for variant in pools}
        self.failures = dict.fromkeys(pools, 0)
        self.cpu: dict[str, dict[str, float]] = {variant: {} for variant in pools}
        """Per variant, CPU seconds per process group over all its batches."""

    def record(self, variant: str, ms: float, happy: bool) -> None:
        """One timed request."""
        self.latencies[variant].append(ms)
        self.failures[variant] += not happy

    def measurement(self, baseline: str, hogged: Measurement | None, batch: int) -> Measurement:
        """The latencies, failures and CPU ms per request."""
        cpu = {
            variant: {name: seconds * 1000 / len(self.latencies[variant]) for name, seconds in spent.items()}
            for variant, spent in self.cpu.items()
            if spent and self.latencies[variant]
        }
        return Measurement(self.latencies, self.failures, baseline, cpu, hogged, batch)


def new_runs() -> Callable[[], dict[str, str]]:
    """Scheduler's headers of a new run at each call: one job, a ScheduleTime a second later each
    time, all well inside the retention and far from counting as forced."""
    job = f"bench-{uuid.uuid4().hex[:8]}"
    base = datetime.now(UTC).replace(microsecond=0) - timedelta(days=1)
    sequence = iter(range(10**9))

    def headers() -> dict[str, str]:
        return {
            "X-CloudScheduler-JobName": job,
            "X-CloudScheduler-ScheduleTime": rfc3339(base + timedelta(seconds=next(sequence))),
        }

    return headers


def own_time(emulator_host: str, runs: int, warmup: int) -> OwnTimes:
    """The seed's handler and runonce's, called in this process on the emulator: each delivery's
    time beside its store calls (benchmarks.own_time)."""
    os.environ["FIRESTORE_EMULATOR_HOST"] = emulator_host
    from benchmarks.endtoend_functions import job_body, seed_answer, seed_ledger
    from runonce import deduplicated

    clock = StoreClock()
    client = TimedClient(clock, project=PROJECT)
    seed = seed_ledger(client)
    handlers = {
        SEED: lambda request: seed_answer(seed, request),
        RUNONCE: deduplicated(client=client)(job_body),
    }
    runs_headers = new_runs()
    return own.measure(handlers, clock, lambda variant: own.request(runs_headers()), runs, warmup)


def measure(
    emulator_host: str,
    runs: int,
    warmup: int,
    batch: int,
    log_dir: Path,
    profile: Path | None = None,
    hog: bool = False,
    processes: dict[str, int] | None = None,
    against: str | None = None,
) -> Measurement:
    """Serve the three variants and the two FastAPI ones (and runonce as of git revision `against`),
    and time `runs` requests of each after `warmup` of each (and as many beside a CPU hog with
    `hog`); `processes` as `interleaved` takes it."""
    env = {"GOOGLE_CLOUD_PROJECT": PROJECT, "FIRESTORE_EMULATOR_HOST": emulator_host}
    if profile is not None:
        env["BENCH_PROFILE"] = str(profile)
    pools = {
        variant: InstancePool(f"bench-{target}", FUNCTIONS, target, 1, env, log_dir)
        for variant, target in VARIANTS.items()
    }
    for variant, target in FASTAPI_VARIANTS.items():
        pools[variant] = InstancePool(
            f"bench-fastapi-{target}", FASTAPI_APPS, target, 1, env, log_dir, Uvicorn()
        )
    if against is not None:
        pools[AGAINST] = against_pool(against, "bench-against", FUNCTIONS, VARIANTS[RUNONCE], env, log_dir)
    runs_headers = new_runs()

    def send(session: requests.Session, variant: str, url: str) -> requests.Response:
        return session.post(url, headers=runs_headers(), data=b"", timeout=30)

    def write_profile(session: requests.Session, urls: dict[str, str]) -> None:
        session.get(urls[RUNONCE] + "profile", timeout=30).raise_for_status()

    return interleaved(
        pools,
        send,
        runs,
        warmup,
        batch,
        after=write_profile if profile else None,
        hog=hog,
        processes=processes,
    )


def render(result: Measurement, batch: int, target: float = TARGET_RATIO) -> str:
    """The report: medians, overheads above the floor, the ratio against the target, and the
    FastAPI row's ratio, shown, when it was measured; then the CPU each request cost, and the
    rounds beside the CPU hog, shown, when they were measured."""
    fastapi = FASTAPI in result.latencies
    served = ", the FastAPI ones one uvicorn process each" if fastapi else ""
    lines = [
        f"End to end over HTTP: one functions-framework process per variant (gunicorn, 1 worker, "
        f"1 thread){served}, one emulator; median of {len(result.latencies['floor'])} requests each, "
        f"in interleaved batches of {batch}",
        *_table(result),
        f"  ratio runonce overhead / {result.baseline} overhead  {result.ratio:.2f}x at the median "
        f"(target <= {target}x), {result.ratio_at(Measurement.p10):.2f}x at the 10th percentile",
        "  the median's 95% interval over the {} rounds drawn again: {:.2f}-{:.2f}x (shown)".format(
            len(result.latencies["floor"]) // result.batch, *result.interval()
        ),
    ]
    if fastapi:
        lines.append(
            f"  ratio runonce (FastAPI) overhead over its floor / {result.baseline} overhead  "
            f"{result.ratio_at(variant=FASTAPI):.2f}x at the median, "
            f"{result.ratio_at(Measurement.p10, FASTAPI):.2f}x at the 10th percentile "
            "(shown, not judged: no target)"
        )
    if AGAINST in result.latencies:
        lines.append(_against_line(result))
    if result.cpu:
        lines.extend(_cpu_lines(result))
    hogged = result.hogged
    if hogged is not None:
        lines += [
            f"Beside a CPU hog (python -c '{HOG}'), in every other round of the same run: median of "
            f"{len(hogged.latencies['floor'])} requests each",
            *_table(hogged),
            f"  ratio runonce overhead / {hogged.baseline} overhead  {hogged.ratio:.2f}x at the median, "
            f"{hogged.ratio_at(Measurement.p10):.2f}x at the 10th percentile (shown, not judged: the "
            f"target is the quiet rounds'; quiet {result.ratio:.2f}x)",
        ]
        if AGAINST in hogged.latencies:
            lines.append(_against_line(hogged))
    return "\n".join(lines)


def _against_line(result: Measurement) -> str:
    """runonce as of the `--against` revision: its ratio to the baseline, and runonce's overhead
    over its, at the median and the 10th percentile."""
    p10 = Measurement.p10
    return (
        f"  ratio {AGAINST} overhead / {result.baseline} overhead  {result.ratio_at(variant=AGAINST):.2f}x "
        f"at the median, {result.ratio_at(p10, AGAINST):.2f}x at the 10th percentile; runonce's overhead "
        f"over its {result.overhead(RUNONCE) / result.overhead(AGAINST):.2f}x at the median, "
        f"{result.overhead(RUNONCE, p10) / result.overhead(AGAINST, p10):.2f}x at the 10th percentile "
        "(shown, not judged)"
    )


def _table(result: Measurement) -> list[str]:
    """A row per variant: median and 10th percentile, each above its floor, and requests not happy."""
    lines = [
        f"  {'variant':<24}{'median':>10}{'over floor':>14}{'p10':>10}{'over floor':>14}{'not happy':>11}"
    ]
    for variant in result.latencies:
        over, over10 = (
            ("", "")
            if variant in ("floor", FASTAPI_FLOOR)
            else (
                f"{result.overhead(variant):11.2f} ms",
                f"{result.overhead(variant, Measurement.p10):11.2f} ms",
            )
        )
        lines.append(
            f"  {variant:<24}{result.median(variant):7.2f} ms{over:>14}"
            f"{result.p10(variant):7.2f} ms{over10:>14}{result.failures[variant]:>11}"
        )
    return lines


def _cpu_lines(result: Measurement) -> list[str]:
    """CPU ms per request of each measured process, the judged variants' above their floor, and
    runonce's over the baseline's."""
    names = list(result.cpu["floor"])
    lines = [
        "  CPU per request in the quiet rounds, every thread (function: the variant's own instance): "
        + ", ".join(f"{name}" for name in names)
    ]
    for variant in (variant for variant in result.cpu if variant not in (FASTAPI_FLOOR, FASTAPI)):
        spent = "  ".join(f"{name} {result.cpu[variant][name]:5.2f} ms" for name in names)
        over = "" if variant == "floor" else f"  above the floor {result.cpu_overhead(variant):5.2f} ms"
        lines.append(f"  {variant:<24}{spent}{over}")
    lines.append(
        f"  ratio runonce CPU above the floor / {result.baseline}'s  {_cpu_ratio(result, result.baseline)}"
    )
    if AGAINST in result.cpu:
        lines.append(f"  ratio runonce CPU above the floor / {AGAINST}'s  {_cpu_ratio(result, AGAINST)}")
    return lines


def _cpu_ratio(result: Measurement, other: str) -> str:
    """runonce's CPU above the floor over `other`'s, or why there is none: `/proc` counts CPU in
    clock ticks, so a short run can read no CPU above the floor for a variant."""
    below = result.cpu_overhead(other)
    if below <= 0:
        return f"n/a: {other}'s CPU above the floor read {below:.2f} ms (too few requests to tell)"
    return f"{result.cpu_overhead(RUNONCE) / below:.2f}x (shown, not judged)"


def verdict(result: Measurement, target: float = TARGET_RATIO) -> int:
    """Print whether the median ratio meets `target` with every judged request answered as
    expected, beside the hog too (the FastAPI variants are shown, not judged); 0 if so."""
    failures = {**result.failures}
    if result.hogged is not None:
        failures = {variant: count + result.hogged.failures[variant] for variant, count in failures.items()}
    met = result.ratio <= target and not any(
        count for variant, count in failures.items() if variant not in SHOWN
    )
    print(f"verdict: {'target met' if met else 'TARGET MISSED'} (ratio {result.ratio:.2f}x)")
    return 0 if met else 1


def sizes(prog: str, description: str) -> argparse.ArgumentParser:
    """The options every end-to-end benchmark takes; the defaults take one to two minutes (80 rounds of
    10 requests per variant, twice with the hog: the more rounds, the narrower the ratio's interval)."""
    parser = argparse.ArgumentParser(prog=prog, description=description)
    parser.add_argument("--runs", type=int, default=800, help="timed requests per variant (default 800)")
    parser.add_argument(
        "--warmup", type=int, default=300, help="untimed requests per variant first (default 300)"
    )
    parser.add_argument("--batch", type=int, default=10, help="requests per variant in a row (default 10)")
    parser.add_argument(
        "--no-hog", dest="hog", action="store_false", help="skip the rounds beside a CPU hog (run by default)"
    )
    parser.add_argument(
        "--against", metavar="REV", help="also serve runonce from the library of git revision REV (shown)"
    )
    return parser


def arguments(argv: list[str] | None = None) -> argparse.Namespace:
    """Sizes of the measurement, and where to write a profile."""
    parser = sizes("python -m benchmarks.endtoend", __doc__.splitlines()[0])
    parser.add_argument("--profile", type=Path, help="write a cProfile of runonce's handler here")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    """Start an emulator, measure, print; exit 1 if the ratio misses the target or a request failed."""
    args = arguments(argv)
    with FirestoreEmulator() as emulator:
        result = measure(
            emulator.host,
            args.runs,
            args.warmup,
            args.batch,
            Path(tempfile.mkdtemp(prefix="runonce-bench-")),
            args.profile,
            args.hog,
            {"emulator": emulator.process_group} if emulator.process_group is not None else None,
            args.against,
        )
        library = own_time(emulator.host, args.runs, args.warmup)
    print(render(result, args.batch))
    print(own.render(library, SEED, args.runs))
    return verdict(result)


if __name__ == "__main__":
    sys.exit(main())
