"""`make bench`, the event path end to end: a Pub/Sub push envelope over HTTP to a real
functions-framework process, three ways.

Each variant of benchmarks.endtoend_event_functions (no deduplication, one Firestore transaction
that checks and records the event id, runonce's `@deduplicated_event`) is served by its own
functions-framework process, as benchmarks.endtoend serves the scheduled variants, on one
Firestore emulator (and a Pub/Sub emulator for the dead-letter topic runonce requires; the happy
path never publishes). The client posts push envelopes with a new messageId per request (every
request a new event, the happy path), in batches that rotate through the variants. It prints each
variant's median latency, the overhead above the floor, and the ratio of runonce's overhead to the
transaction's (target <= 0.75x), and the same at the 10th percentile; then the same beside a
CPU hog and the CPU per request, as benchmarks.endtoend does.

Then the store calls alone, in this process on the same emulator, interleaved: runonce's claim
and completion (the ledger's two direct writes) against the pattern's transaction. Their ratio is
the lowest the end-to-end ratio can reach whatever the library does around them; it is printed,
not judged.
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

import requests

from benchmarks import own_time as own
from benchmarks.endtoend import AGAINST, Measurement, against_pool, interleaved, render, sizes, verdict
from benchmarks.own_time import OwnTimes, StoreClock, TimedClient
from emulator.firestore import FirestoreEmulator
from emulator.pubsub import PubSubEmulator
from localscheduler.hosts.pool import InstancePool

FUNCTIONS = Path(__file__).with_name("endtoend_event_functions.py")
TRANSACTION = "transaction (event id)"
VARIANTS = {"floor": "floor", TRANSACTION: "transaction_pattern", "runonce": "deduplicated_push"}
TARGET_RATIO = 0.75
PROJECT = "runonce-bench"


JSON = {"Content-Type": "application/json"}


def new_events(run: str) -> Callable[[], str]:
    """A push envelope of a new message at each call, on one subscription."""
    subscription = f"projects/{PROJECT}/subscriptions/bench-{run}"
    sequence = iter(range(10**9))

    def envelope() -> str:
        message = {
            "data": base64.b64encode(b'{"order": 1}').decode(),
            "messageId": f"{run}-{next(sequence)}",
            "publishTime": datetime.now(UTC).isoformat().replace("+00:00", "Z"),
        }
        return json.dumps({"message": message, "subscription": subscription})

    return envelope


def own_time(firestore_host: str, pubsub_host: str, runs: int, warmup: int) -> OwnTimes:
    """The transaction pattern's handler and runonce's, called in this process on the emulators:
    each new event's time beside its store calls (benchmarks.own_time)."""
    os.environ["FIRESTORE_EMULATOR_HOST"] = firestore_host
    os.environ["PUBSUB_EMULATOR_HOST"] = pubsub_host
    from benchmarks.endtoend_event_functions import event_body, transaction_answer
    from runonce import deduplicated_event

    run = uuid.uuid4().hex[:8]
    clock = StoreClock()
    client = TimedClient(clock, project=PROJECT)
    topic = f"projects/{PROJECT}/topics/bench-dead-{run}"
    handlers: dict[str, own.Handler] = {
        TRANSACTION: lambda request: transaction_answer(client, request),
        "runonce": deduplicated_event(client=client, dead_letter_topic=topic, collection=f"own_{run}")(
            event_body
        ),
    }
    envelope = new_events(run)
    return own.measure(handlers, clock, lambda variant: own.request(JSON, envelope().encode()), runs, warmup)


def measure(
    firestore_host: str,
    pubsub_host: str,
    runs: int,
    warmup: int,
    batch: int,
    log_dir: Path,
    hog: bool = False,
    processes: dict[str, int] | None = None,
    against: str | None = None,
) -> Measurement:
    """Serve the three variants (and runonce as of git revision `against`) and time `runs` push
    requests of each after `warmup` of each (and as many beside a CPU hog with `hog`); `processes`
    as `benchmarks.endtoend.interleaved` takes it."""
    run = uuid.uuid4().hex[:8]
    env = {
        "GOOGLE_CLOUD_PROJECT": PROJECT,
        "FIRESTORE_EMULATOR_HOST": firestore_host,
        "PUBSUB_EMULATOR_HOST": pubsub_host,
        "RUNONCE_COLLECTION": f"bench_events_{run}",
        "RUNONCE_DEAD_LETTER_TOPIC": f"projects/{PROJECT}/topics/bench-dead-{run}",
    }
    pools = {
        variant: InstancePool(f"bench-{target}", FUNCTIONS, target, 1, env, log_dir)
        for variant, target in VARIANTS.items()
    }
    if against is not None:
        pools[AGAINST] = against_pool(against, "bench-against", FUNCTIONS, VARIANTS["runonce"], env, log_dir)
    envelope = new_events(run)

    def send(session: requests.Session, variant: str, url: str) -> requests.Response:
        return session.post(url, data=envelope(), headers=JSON, timeout=30)

    return interleaved(pools, send, runs, warmup, batch, baseline=TRANSACTION, hog=hog, processes=processes)


def store_floor(firestore_host: str, runs: int, warmup: int) -> tuple[float, float]:
    """Median ms of the store calls alone, one new event each, interleaved: (runonce's claim and
    completion, the pattern's check-and-record transaction)."""
    os.environ["FIRESTORE_EMULATOR_HOST"] = firestore_host
    from google.cloud import firestore

    from benchmarks.endtoend_event_functions import first_time
    from benchmarks.ledger import runonce_ledger
    from runonce.core.store import Claim, StoredResult
    from runonce.store.firestore import LedgerStore

    client = firestore.Client(project=PROJECT)
    store = LedgerStore(runonce_ledger(client))

    def runonce_writes(event_id: str) -> None:
        claim = store.claim(event_id, {"event_id": event_id, "source": "bench"})
        assert isinstance(claim, Claim), claim
        assert store.complete(claim, StoredResult.of({"stored": event_id})) is not None

    def transaction(event_id: str) -> None:
        assert first_time(client, event_id)

    times: dict[str, list[float]] = {"runonce": [], "transaction": []}
    calls = {"runonce": runonce_writes, "transaction": transaction}
    for n in range(warmup + runs):
        for name in calls if n % 2 else reversed(list(calls)):
            started = time.perf_counter()
            calls[name](f"floor-{n}-{uuid.uuid4().hex[:6]}")
            if n >= warmup:
                times[name].append((time.perf_counter() - started) * 1000)
    return statistics.median(times["runonce"]), statistics.median(times["transaction"])


def arguments(argv: list[str] | None = None) -> argparse.Namespace:
    """Sizes of the measurement."""
    return sizes("python -m benchmarks.endtoend_events", __doc__.splitlines()[0]).parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    """Start the emulators, measure, print; exit 1 if the ratio misses the target or a request failed."""
    args = arguments(argv)
    with FirestoreEmulator() as firestore_emulator, PubSubEmulator() as pubsub_emulator:
        result = measure(
            firestore_emulator.host,
            pubsub_emulator.host,
            args.runs,
            args.warmup,
            args.batch,
            Path(tempfile.mkdtemp(prefix="runonce-bench-events-")),
            args.hog,
            {"emulator": firestore_emulator.process_group} if firestore_emulator.process_group else None,
            args.against,
        )
        ours, pattern = store_floor(firestore_emulator.host, args.runs, args.warmup)
        library = own_time(firestore_emulator.host, pubsub_emulator.host, args.runs, args.warmup)
    print(render(result, args.batch, TARGET_RATIO))
    print(
        f"store calls alone, median of {args.runs} each, interleaved in this process: runonce's claim "
        f"and completion {ours:.2f} ms, the transaction {pattern:.2f} ms: {ours / pattern:.2f}x, the "
        "lowest ratio the end to end can reach"
    )
    print(own.render(library, TRANSACTION, args.runs))
    return verdict(result, TARGET_RATIO)


if __name__ == "__main__":
    sys.exit(main())
