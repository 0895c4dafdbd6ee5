"""`make bench`, Valkey: runonce's Valkey store against Powertools' Redis pattern, side by side.

One Redis-protocol server (valkey-server, else redis-server, started as the tests start it), one
process, the two interleaved run by run so that both see the same machine load:

- runonce: `ValkeyStore.claim` and `complete` of a scheduled run (one FCALL each: fenced, the
  lease on the server's clock, the key's expiry, the job's index);
- the baseline, AWS Lambda Powertools' Redis layer as it claims and completes: `SET NX EX` of the
  in-progress record, then a plain `SET EX` of the completed one, each record JSON built in the
  client (two round trips, no fencing: the pattern issue 31 cites).

Prints the median store time per distinct run of each and the ratio (target: runonce at most
1.1x the baseline), the server's share of each (INFO commandstats: FCALL against SET), then the
round trips per outcome of both, counted by a proxy between client and server.
"""

from __future__ import annotations

import logging
import os
import statistics
import sys
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any, cast

import valkey

from benchmarks.valkey_pattern import PowertoolsPattern
from runonce.core.store import Claim, StoredResult
from runonce.store.valkey import ValkeyStore
from tests.store.valkey_server import ReplyDropper, ValkeyServer

RUNS = int(os.environ.get("BENCH_RUNS", "2000"))
WARMUP = int(os.environ.get("BENCH_WARMUP", "300"))
TARGET_RATIO = 1.1
LEASE = timedelta(minutes=10)
RETENTION = timedelta(days=1)
RESULT = {"published": True}
PATTERN = "Powertools (SET NX, SET)"


def scheduled_fields(job: str, n: int) -> dict[str, Any]:
    """The fields a scheduled run's claim carries (runonce.scheduler.adapter's), run `n` of `job`."""
    return {
        "job": job,
        "schedule_time": f"2026-12-07T{n // 3600 % 24:02d}:{n // 60 % 60:02d}:{n % 60:02d}Z",
        "forced": False,
        "project": "runonce-bench",
        "location": "europe-west1",
    }


def _runonce_run(store: ValkeyStore, key: str, fields: dict[str, Any]) -> None:
    claim = store.claim(key, fields)
    assert isinstance(claim, Claim), f"runonce did not claim {key}: {claim}"
    assert store.complete(claim, StoredResult.of(RESULT)) is not None


def _pattern_run(pattern: PowertoolsPattern, key: str) -> None:
    assert pattern.claim(key), f"the pattern did not claim {key}"
    pattern.complete(key, RESULT)


def _pattern_failed(pattern: PowertoolsPattern, key: str) -> None:
    assert pattern.claim(key), f"the pattern did not claim {key}"
    pattern.fail(key)


SIDES = {"runonce": "runonce (2 FCALL)", "pattern": PATTERN, "floor": "its arguments, no work"}
"""Each side's name in the report; `floor` sends runonce's two calls' arguments to a script that
does nothing (EVALSHA): what sending them costs, the floor of any store that sends them."""
COMMANDS = {"runonce": "fcall", "pattern": "set", "floor": "evalsha"}
"""The one command each side's store time is spent in on the server (INFO commandstats)."""
BATCH = 20


@dataclass(frozen=True)
class StoreTimes:
    """Per side (SIDES): each run's store time, ms; and per run, us: this process's CPU, the
    server process's CPU, and the server's time inside the side's command."""

    times: dict[str, list[float]]
    client_cpu_us: dict[str, float]
    server_cpu_us: dict[str, float]
    command_us: dict[str, float]

    def median_us(self, side: str) -> float:
        """The side's median store time per run, us."""
        return statistics.median(self.times[side]) * 1000

    @property
    def ratio(self) -> float:
        """runonce's median over the pattern's: the figure with the target."""
        return self.median_us("runonce") / self.median_us("pattern")

    @property
    def cpu_ratio(self) -> float:
        """runonce's CPU per run, both processes, over the pattern's: less moved by other load."""
        cpu = {side: self.client_cpu_us[side] + self.server_cpu_us[side] for side in ("runonce", "pattern")}
        return cpu["runonce"] / cpu["pattern"]


def _server_usec(client: valkey.Valkey, command: str) -> float:
    stats = cast(dict[str, Any], client.info("commandstats")).get(f"cmdstat_{command}", {})
    return float(stats.get("usec", 0))


def _cpu_seconds(pid: int) -> float:
    """The CPU time process `pid` has spent, user and system (/proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _sent_calls(store: ValkeyStore, client: valkey.Valkey, fields: dict[str, Any]) -> list[tuple[Any, ...]]:
    """The FCALLs' arguments one claim and completion send, as EVALSHA calls of a script that
    does nothing (same keys, same arguments, the function's name in place of the script's)."""
    sent: list[tuple[Any, ...]] = []
    send = store._client.execute_command

    def recorded(*args: Any, **options: Any) -> Any:
        sent.append(args)
        return send(*args, **options)

    store._client.execute_command = recorded  # type: ignore[method-assign]
    try:
        _runonce_run(store, "captured", fields)
    finally:
        del store._client.execute_command
    nothing = client.script_load("return 1")
    return [("EVALSHA", nothing, *args[2:]) for args in sent if args[0] == "FCALL"]


def store_times(port: int, server_pid: int, runs: int, warmup: int) -> StoreTimes:
    """Claim and complete `runs` new runs on each side after `warmup`, on the server at `port`
    (process `server_pid`), in batches of BATCH per side that rotate, so that every side sees the
    same load; the CPU of this process and the server's is read around each batch."""
    ours = valkey.Valkey(port=port, decode_responses=True)
    theirs = valkey.Valkey(port=port, decode_responses=True)
    empty = valkey.Valkey(port=port, decode_responses=True)
    admin = valkey.Valkey(port=port, decode_responses=True)
    run = uuid.uuid4().hex[:8]
    store = ValkeyStore(ours, f"bench-{run}", LEASE, RETENTION)
    pattern = PowertoolsPattern(theirs, RETENTION, LEASE)
    job = f"bench-{run}"
    calls = _sent_calls(store, empty, scheduled_fields(job, 0))

    def floor(n: int) -> None:
        for call in calls:
            empty.execute_command(*call)

    sides: dict[str, Callable[[int], None]] = {
        "runonce": lambda n: _runonce_run(store, f"run-{n}", scheduled_fields(job, n)),
        "pattern": lambda n: _pattern_run(pattern, f"pt-{run}-{n}"),
        "floor": floor,
    }
    times: dict[str, list[float]] = {side: [] for side in sides}
    client_cpu = dict.fromkeys(sides, 0.0)
    server_cpu = dict.fromkeys(sides, 0.0)
    warm_rounds, timed_rounds = -(-warmup // BATCH), max(1, -(-runs // BATCH))
    names, numbers = list(sides), iter(range(10**9))
    for round_ in range(warm_rounds + timed_rounds):
        if round_ == warm_rounds:
            before = {side: _server_usec(admin, command) for side, command in COMMANDS.items()}
        for side in names[round_ % 3 :] + names[: round_ % 3]:
            client, server = time.process_time(), _cpu_seconds(server_pid)
            for _ in range(BATCH):
                started = time.perf_counter()
                sides[side](next(numbers))
                if round_ >= warm_rounds:
                    times[side].append((time.perf_counter() - started) * 1000)
            if round_ >= warm_rounds:
                client_cpu[side] += time.process_time() - client
                server_cpu[side] += _cpu_seconds(server_pid) - server
    command = {side: _server_usec(admin, name) - before[side] for side, name in COMMANDS.items()}
    for connection in (ours, theirs, empty, admin):
        connection.close()
    timed = timed_rounds * BATCH
    return StoreTimes(
        times,
        {side: seconds * 1e6 / timed for side, seconds in client_cpu.items()},
        {side: seconds * 1e6 / timed for side, seconds in server_cpu.items()},
        {side: usec / timed for side, usec in command.items()},
    )


def round_trips(port: int) -> dict[str, dict[str, int]]:
    """Round trips per outcome of each side, counted by a proxy in front of the server at `port`."""
    proxy = ReplyDropper(port)
    client = valkey.Valkey(port=proxy.port, decode_responses=True)
    try:
        run = uuid.uuid4().hex[:8]
        store = ValkeyStore(client, f"trips-{run}", LEASE, RETENTION)
        pattern = PowertoolsPattern(client, RETENTION, LEASE)
        fields = scheduled_fields("trips", 1)
        _runonce_run(store, "warm", fields)  # the store's first call checks the server's eviction policy

        def count(action: Callable[[], object]) -> int:
            proxy.round_trips = 0
            action()
            return proxy.round_trips

        def claim_twice(claim: Callable[[], object]) -> int:
            claim()
            return count(claim)

        def failed() -> None:
            claim = store.claim("rt-3", fields)
            assert isinstance(claim, Claim)
            store.fail(claim, "bench: the job raised")

        return {
            "runonce": {
                "claimed (claim + complete)": count(lambda: _runonce_run(store, "rt-1", fields)),
                "duplicate of completed": count(lambda: store.claim("rt-1", fields)),
                "in progress": claim_twice(lambda: store.claim("rt-2", fields)),
                "failed (claim + fail)": count(failed),
            },
            PATTERN: {
                "claimed (claim + complete)": count(lambda: _pattern_run(pattern, f"pt-{run}-rt-1")),
                "duplicate of completed": count(lambda: pattern.claim(f"pt-{run}-rt-1")),
                "in progress": claim_twice(lambda: pattern.claim(f"pt-{run}-rt-2")),
                "failed (claim + fail)": count(lambda: _pattern_failed(pattern, f"pt-{run}-rt-3")),
            },
        }
    finally:
        client.close()
        proxy.close()


def event_round_trips(port: int) -> dict[str, tuple[int, str]]:
    """Round trips per outcome of `@deduplicated_event` on Valkey (RUNONCE_STORE naming a proxy
    in front of the server at `port`), push envelopes through a Flask test client as
    benchmarks.events sends them: each outcome's count and the outcome answered."""
    import flask

    import runonce
    from benchmarks.events import _envelope

    proxy = ReplyDropper(port)
    saved = {name: os.environ.get(name) for name in ("RUNONCE_STORE", "PUBSUB_EMULATOR_HOST")}
    os.environ["RUNONCE_STORE"] = f"valkey://127.0.0.1:{proxy.port}"
    os.environ["PUBSUB_EMULATOR_HOST"] = "127.0.0.1:9"  # a publisher is built; these outcomes never publish
    state = {"fail": False}

    def job(event: runonce.Event) -> dict[str, bool]:
        if state["fail"]:
            raise RuntimeError("bench: a retryable failure")
        return {"ok": True}

    logger = logging.getLogger("runonce")
    logger.disabled = True  # one JSON line per request would bury the table
    try:
        run = uuid.uuid4().hex[:8]
        handler = runonce.deduplicated_event(
            collection=f"bench_events_{run}", dead_letter_topic="projects/p/topics/dead", max_event_age=3600
        )(job)
        app = flask.Flask("bench-valkey-events")
        request = cast(Any, flask.request)
        app.add_url_rule("/", "push", lambda: handler(request._get_current_object()), methods=["POST"])
        http = app.test_client()

        def trips(message_id: str) -> tuple[int, str]:
            proxy.round_trips = 0
            answer = http.post("/", data=_envelope(f"{run}-{message_id}"), content_type="application/json")
            return proxy.round_trips, str(cast(dict, answer.json)["outcome"])

        trips("warm")  # the store's first call checks the server's eviction policy
        rows = {"completed (claim + complete)": trips("rt-1")}
        rows["duplicate of a completed event"] = trips("rt-1")
        state["fail"] = True
        rows["retryable failure (claim + release)"] = trips("rt-2")
        state["fail"] = False
        rows["its redelivery, completed"] = trips("rt-2")
        return rows
    finally:
        logger.disabled = False
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
        proxy.close()


def render_events(rows: dict[str, tuple[int, str]]) -> str:
    """The event path's round trips per outcome on Valkey."""
    lines = ["Valkey round trips per outcome of @deduplicated_event (Pub/Sub push, Flask test client)"]
    for name, (count, outcome) in rows.items():
        lines.append(f"  {name:<36}{count:>4}   outcome {outcome}")
    return "\n".join(lines)


def render(times: StoreTimes, trips: dict[str, dict[str, int]], runs: int) -> str:
    """The report: store time and CPU per run of each side, the ratio against the target, the
    CPU ratio beside it (shown), the round trips per outcome."""
    lines = [
        f"Valkey store time per distinct run, median of {len(times.times['runonce'])} runs each, in "
        f"interleaved batches of {BATCH} on one server; CPU per run of this process and the server's, "
        "and the server's time inside the side's command (INFO commandstats)",
        f"  {'side':<26}{'median':>10}{'client CPU':>12}{'server CPU':>12}{'in command':>12}",
    ]
    for side, name in SIDES.items():
        lines.append(
            f"  {name:<26}{times.median_us(side):7.0f} us{times.client_cpu_us[side]:9.0f} us"
            f"{times.server_cpu_us[side]:9.0f} us{times.command_us[side]:9.1f} us"
        )
    lines += [
        f"  ratio runonce/Powertools  {times.ratio:6.2f}x   (target <= {TARGET_RATIO}x); CPU of both "
        f"processes {times.cpu_ratio:.2f}x (shown)",
        "Valkey round trips per outcome",
        f"  {'outcome':<30}" + "".join(f"{name:>26}" for name in trips),
    ]
    for outcome in trips["runonce"]:
        lines.append(f"  {outcome:<30}" + "".join(f"{trips[name][outcome]:>26}" for name in trips))
    return "\n".join(lines)


def verdict(
    times: StoreTimes, trips: dict[str, dict[str, int]], events: dict[str, tuple[int, str]] | None = None
) -> int:
    """Print whether the ratio meets the target with the happy path in 2 round trips (a run's,
    and an event's when given); 0 if so."""
    happy = trips["runonce"]["claimed (claim + complete)"]
    event = events["completed (claim + complete)"][0] if events else 2
    met = times.ratio <= TARGET_RATIO and happy == 2 and event == 2
    print(
        f"verdict: {'target met' if met else 'TARGET MISSED'} "
        f"(ratio {times.ratio:.2f}x, happy path {happy} round trips, an event's {event})"
    )
    return 0 if met else 1


def main() -> int:
    """Start a server, measure, print; exit 1 if the target is missed."""
    server = ValkeyServer()
    try:
        times = store_times(server.port, server.pid, RUNS, WARMUP)
        trips = round_trips(server.port)
        events = event_round_trips(server.port)
    finally:
        server.stop()
    print(render(times, trips, RUNS))
    print(render_events(events))
    return verdict(times, trips, events)


if __name__ == "__main__":
    sys.exit(main())
