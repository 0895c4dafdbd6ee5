"""`make bench`, Valkey end to end: requests over HTTP to real functions-framework processes whose
runonce runs on a Valkey server (RUNONCE_STORE), then throughput on each store.

Latency, as benchmarks.endtoend measures it (its `interleaved` rotation, one process per variant,
gunicorn with one thread: Cloud Run with concurrency 1), for a scheduled job and for a Pub/Sub push
event, three variants each on one Redis-protocol server: the body alone (the floor), the body
behind Powertools' pattern (benchmarks.valkey_functions) and the body under runonce with
RUNONCE_STORE naming the server. It prints each variant's median, its overhead above the floor,
and runonce's overhead over the pattern's: shown, not judged (issue 31 sets the target on the store
time, benchmarks.valkey).

Throughput: new events per second through one instance serving 8 requests at once (gunicorn with
8 threads: Cloud Run with concurrency 8), 8 clients each posting new events, for the floor and for
runonce on each store (the Firestore emulator, Valkey), in interleaved rounds. Shown, not judged.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import requests

from benchmarks.endtoend import Measurement, interleaved, new_runs
from benchmarks.endtoend_events import JSON, new_events
from emulator.firestore import FirestoreEmulator
from localscheduler.hosts.functions_framework import FunctionsFramework
from localscheduler.hosts.pool import InstancePool
from tests.store.valkey_server import ValkeyServer

HERE = Path(__file__).parent
SCHEDULED_FUNCTIONS = HERE / "endtoend_functions.py"
EVENT_FUNCTIONS = HERE / "endtoend_event_functions.py"
PATTERN_FUNCTIONS = HERE / "valkey_functions.py"
PATTERN, RUNONCE = "Powertools (SET NX, SET)", "runonce on Valkey"
SCHEDULED = {
    "floor": (SCHEDULED_FUNCTIONS, "floor"),
    PATTERN: (PATTERN_FUNCTIONS, "scheduled_pattern"),
    RUNONCE: (SCHEDULED_FUNCTIONS, "deduplicated_job"),
}
EVENTS = {
    "floor": (EVENT_FUNCTIONS, "floor"),
    PATTERN: (PATTERN_FUNCTIONS, "push_pattern"),
    RUNONCE: (EVENT_FUNCTIONS, "deduplicated_push"),
}
CONCURRENCY = 8
PROJECT = "runonce-bench"


@dataclass(frozen=True)
class Concurrent(FunctionsFramework):
    """functions-framework serving `threads` requests at once (Cloud Run's concurrency)."""

    threads: int = CONCURRENCY

    def environment(self, source: Path, target: str) -> dict[str, str]:
        """As FunctionsFramework's, with `threads` threads in its one worker."""
        return {**super().environment(source, target), "THREADS": str(self.threads)}


def environment(valkey_port: int, firestore_host: str, run: str) -> dict[str, str]:
    """Every instance's: runonce on the Valkey server, its records under this run's prefix (the
    local instances warm a Firestore client up as they start: the emulator's address too)."""
    return {
        "GOOGLE_CLOUD_PROJECT": PROJECT,
        "FIRESTORE_EMULATOR_HOST": firestore_host,
        "RUNONCE_STORE": f"valkey://127.0.0.1:{valkey_port}",
        "BENCH_VALKEY_PORT": str(valkey_port),
        "RUNONCE_COLLECTION": f"bench_{run}",
        "RUNONCE_DEAD_LETTER_TOPIC": f"projects/{PROJECT}/topics/bench-dead-{run}",
        "PUBSUB_EMULATOR_HOST": "127.0.0.1:9",  # a publisher is built; the happy path never publishes
    }


def latency(
    variants: dict[str, tuple[Path, str]],
    send: Callable[[requests.Session, str, str], requests.Response],
    env: dict[str, str],
    args: argparse.Namespace,
    log_dir: Path,
) -> Measurement:
    """`variants` served one process each, timed by benchmarks.endtoend's rotation."""
    pools = {
        variant: InstancePool(f"bench-{target}", source, target, 1, env, log_dir)
        for variant, (source, target) in variants.items()
    }
    return interleaved(pools, send, args.runs, args.warmup, args.batch, baseline=PATTERN)


def throughput(
    pools: dict[str, InstancePool], events: int, warmup: int, batch: int
) -> dict[str, tuple[float, int]]:
    """New events per second through each pool's one instance, CONCURRENCY clients posting at
    once, `events` timed per variant after `warmup`, in rounds of `batch` per variant that rotate;
    with the requests not answered 200 and completed (or 200 at all for the floor)."""
    spent = dict.fromkeys(pools, 0.0)
    failures = dict.fromkeys(pools, 0)
    envelope = new_events(uuid.uuid4().hex[:8])
    local = threading.local()

    def post(url: str) -> bool:
        if not hasattr(local, "session"):
            local.session = requests.Session()
            local.session.trust_env = False
        response = local.session.post(url, data=envelope(), headers=JSON, timeout=60)
        return response.status_code == 200 and response.json().get("outcome", "completed") == "completed"

    try:
        for pool in pools.values():
            pool.start()
        names = list(pools)
        with ThreadPoolExecutor(CONCURRENCY) as clients:
            warm_rounds = -(-warmup // batch)
            for round_ in range(warm_rounds + max(1, -(-events // batch))):
                for variant in names[round_ % len(names) :] + names[: round_ % len(names)]:
                    url = pools[variant].instances[0].url
                    started = time.perf_counter()
                    answers = list(clients.map(post, [url] * batch))
                    if round_ >= warm_rounds:
                        spent[variant] += time.perf_counter() - started
                        failures[variant] += answers.count(False)
    finally:
        for pool in pools.values():
            pool.stop()
    timed = max(1, -(-events // batch)) * batch
    return {variant: (timed / spent[variant], failures[variant]) for variant in pools}


def render_latency(title: str, result: Measurement) -> str:
    """Medians, overheads above the floor and runonce's over the pattern's."""
    count = len(result.latencies["floor"])
    lines = [
        f"{title}: one functions-framework process per variant (1 thread), one Valkey server; "
        f"median of {count} requests each",
        f"  {'variant':<28}{'median':>10}{'over floor':>14}{'p10':>10}{'over floor':>14}{'not happy':>11}",
    ]
    for variant in result.latencies:
        over = "" if variant == "floor" else f"{result.overhead(variant):11.2f} ms"
        over10 = "" if variant == "floor" else f"{result.overhead(variant, Measurement.p10):11.2f} ms"
        lines.append(
            f"  {variant:<28}{result.median(variant):7.2f} ms{over:>14}"
            f"{result.p10(variant):7.2f} ms{over10:>14}{result.failures[variant]:>11}"
        )
    lines.append(
        f"  ratio runonce overhead / {PATTERN} overhead  {result.ratio_at(variant=RUNONCE):.2f}x at the "
        f"median, {result.ratio_at(Measurement.p10, RUNONCE):.2f}x at the 10th percentile (shown, not judged)"
    )
    return "\n".join(lines)


def render_throughput(rates: dict[str, tuple[float, int]], events: int) -> str:
    """Events per second per variant, and each store's share of the floor's."""
    floor = rates["floor"][0]
    lines = [
        f"Throughput: new events per second through one instance at {CONCURRENCY} concurrent requests "
        f"(gunicorn, {CONCURRENCY} threads), {events} events each, interleaved rounds",
        f"  {'variant':<28}{'events/s':>10}{'of floor':>10}{'not happy':>11}",
    ]
    for variant, (rate, failed) in rates.items():
        lines.append(f"  {variant:<28}{rate:10.0f}{rate / floor:9.2f}x{failed:>11}")
    return "\n".join(lines)


def arguments(argv: list[str] | None = None) -> argparse.Namespace:
    """Sizes of the measurements; the defaults take about two minutes here."""
    parser = argparse.ArgumentParser(prog="python -m benchmarks.valkey_endtoend", description=__doc__)
    parser.add_argument("--runs", type=int, default=300, help="timed requests per variant (default 300)")
    parser.add_argument("--warmup", type=int, default=100, help="untimed requests per variant first")
    parser.add_argument("--batch", type=int, default=20, help="requests per variant in a row (default 20)")
    parser.add_argument("--events", type=int, default=800, help="timed events per variant, throughput")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    """Start a Valkey server and a Firestore emulator, measure, print. Exit 1 if a request of
    runonce's or the pattern's was not answered as the happy path (nothing here has a target)."""
    args = arguments(argv)
    log_dir = Path(tempfile.mkdtemp(prefix="runonce-bench-valkey-"))
    server = ValkeyServer()
    try:
        with FirestoreEmulator() as emulator:
            env = environment(server.port, emulator.host, uuid.uuid4().hex[:8])
            runs_headers = new_runs()
            scheduled = latency(
                SCHEDULED,
                lambda session, variant, url: session.post(url, headers=runs_headers(), data=b"", timeout=30),
                env,
                args,
                log_dir,
            )
            envelope = new_events(uuid.uuid4().hex[:8])
            events = latency(
                EVENTS,
                lambda session, variant, url: session.post(url, data=envelope(), headers=JSON, timeout=30),
                env,
                args,
                log_dir,
            )
            on_firestore = {key: value for key, value in env.items() if key != "RUNONCE_STORE"}
            stores = {"floor": env, "runonce on Firestore": on_firestore, RUNONCE: env}
            pools = {
                variant: InstancePool(
                    f"bench-rate-{n}",
                    EVENT_FUNCTIONS,
                    EVENTS.get(variant, EVENTS[RUNONCE])[1],
                    1,
                    variant_env,
                    log_dir,
                    Concurrent(),
                )
                for n, (variant, variant_env) in enumerate(stores.items())
            }
            rates = throughput(pools, args.events, args.warmup * 3, CONCURRENCY * 10)
    finally:
        server.stop()
    print(render_latency("End to end over HTTP on Valkey, scheduled", scheduled))
    print(render_latency("End to end over HTTP on Valkey, events", events))
    print(render_throughput(rates, args.events))
    failed = sum(scheduled.failures.values()) + sum(events.failures.values())
    failed += sum(failures for _, failures in rates.values())
    answered = "every request answered" if not failed else f"{failed} REQUESTS NOT ANSWERED"
    print(f"verdict: {answered} (no target)")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
