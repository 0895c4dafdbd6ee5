"""`make bench`, the time a delivery spends beside its store calls: runonce against the baseline.

In this process, on the benchmark's emulator, each handler is called with a Flask request as
functions-framework would call it, alternately, a new run or event each; a Firestore client
whose gRPC channel is timed adds up the time spent inside the store's calls (each call, and each
message of a streamed read). A delivery's own time is its wall time minus that: what the handler
and the client library spend around the round trips (parsing, keys, settings, log lines, building
and reading requests, the transaction's machinery). No HTTP server runs, so these are the
milliseconds the end-to-end figures carry above the round trips themselves, and a regression in
the library shows here first.
"""

from __future__ import annotations

import statistics
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import redirect_stdout
from dataclasses import dataclass
from typing import Any

import flask
import grpc
from google.cloud import firestore
from werkzeug.test import EnvironBuilder


class StoreClock:
    """Seconds spent inside store calls, added up per thread since the last `start`."""

    def __init__(self) -> None:
        self._local = threading.local()

    def start(self) -> None:
        """Count from zero on this thread."""
        self._local.seconds = 0.0

    @property
    def seconds(self) -> float:
        """Time inside store calls on this thread since `start`."""
        return getattr(self._local, "seconds", 0.0)

    def add(self, seconds: float) -> None:
        """Count `seconds` spent inside a store call."""
        self._local.seconds = self.seconds + seconds


class _TimedCall:
    """A unary-unary or unary-stream callable whose calls (and streamed messages) are timed."""

    def __init__(self, inner: Any, clock: StoreClock, stream: bool):
        self._inner = inner
        self._clock = clock
        self._stream = stream

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        started = time.perf_counter()
        try:
            result = self._inner(*args, **kwargs)
        finally:
            self._clock.add(time.perf_counter() - started)
        return _TimedStream(result, self._clock) if self._stream else result

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


class _TimedStream:
    """A streamed answer whose messages are timed as they are read; the rest is the call's own."""

    def __init__(self, inner: Any, clock: StoreClock):
        self._inner = inner
        self._clock = clock

    def __iter__(self) -> Iterator[Any]:
        return self

    def __next__(self) -> Any:
        started = time.perf_counter()
        try:
            return next(self._inner)
        finally:
            self._clock.add(time.perf_counter() - started)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


class _TimedChannel(grpc.Channel):
    """A gRPC channel whose unary calls and streamed reads count towards a `StoreClock`."""

    def __init__(self, inner: grpc.Channel, clock: StoreClock):
        self._inner = inner
        self._clock = clock

    def unary_unary(self, *args: Any, **kwargs: Any) -> Any:
        return _TimedCall(self._inner.unary_unary(*args, **kwargs), self._clock, stream=False)

    def unary_stream(self, *args: Any, **kwargs: Any) -> Any:
        return _TimedCall(self._inner.unary_stream(*args, **kwargs), self._clock, stream=True)

    def stream_unary(self, *args: Any, **kwargs: Any) -> Any:
        return self._inner.stream_unary(*args, **kwargs)

    def stream_stream(self, *args: Any, **kwargs: Any) -> Any:
        return self._inner.stream_stream(*args, **kwargs)

    def subscribe(self, callback: Any, try_to_connect: bool = False) -> None:
        self._inner.subscribe(callback, try_to_connect)

    def unsubscribe(self, callback: Any) -> None:
        self._inner.unsubscribe(callback)

    def close(self) -> None:
        self._inner.close()

    def __enter__(self) -> _TimedChannel:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class TimedClient(firestore.Client):
    """A firestore.Client on the emulator whose time inside store calls `clock` adds up."""

    def __init__(self, clock: StoreClock, **kwargs: Any):
        super().__init__(**kwargs)
        self.clock = clock

    def _emulator_channel(self, transport: Any) -> Any:
        if self._emulator_host is None:
            raise RuntimeError("TimedClient only talks to the emulator: set FIRESTORE_EMULATOR_HOST")
        return _TimedChannel(super()._emulator_channel(transport), self.clock)


@dataclass(frozen=True)
class OwnTimes:
    """Per variant, one entry per timed delivery: wall ms and ms inside store calls."""

    wall: dict[str, list[float]]
    store: dict[str, list[float]]

    def own(self, variant: str) -> float:
        """Median ms of a delivery beside its store calls."""
        return statistics.median(w - s for w, s in zip(self.wall[variant], self.store[variant], strict=True))

    def median_store(self, variant: str) -> float:
        """Median ms inside store calls per delivery."""
        return statistics.median(self.store[variant])


Handler = Callable[[flask.Request], Any]
"""A functions-framework HTTP function: called with the request, returns what Flask sends."""


def request(headers: dict[str, str] | None = None, body: bytes = b"") -> flask.Request:
    """A POST request as functions-framework hands it to a function."""
    environ = EnvironBuilder(method="POST", headers=list((headers or {}).items()), data=body).get_environ()
    return flask.Request(environ)


def measure(
    handlers: dict[str, Handler],
    clock: StoreClock,
    requests: Callable[[str], flask.Request],
    runs: int,
    warmup: int,
) -> OwnTimes:
    """Call each handler `warmup` then `runs` times, alternating (the first swapped each round),
    each with a new request from `requests(variant)`; its log lines go to a file, as a served
    function's do."""
    wall: dict[str, list[float]] = {name: [] for name in handlers}
    store: dict[str, list[float]] = {name: [] for name in handlers}
    names = list(handlers)
    with tempfile.TemporaryFile("w") as lines, redirect_stdout(lines):
        for n in range(warmup + runs):
            for name in names if n % 2 else reversed(names):
                given = requests(name)
                clock.start()
                started = time.perf_counter()
                handlers[name](given)
                elapsed = time.perf_counter() - started
                if n >= warmup:
                    wall[name].append(elapsed * 1000)
                    store[name].append(clock.seconds * 1000)
    return OwnTimes(wall, store)


def render(result: OwnTimes, baseline: str, runs: int) -> str:
    """One line per variant and the ratio of runonce's own time to the baseline's."""
    lines = [
        f"Beside the store calls, in this process (a Flask request, no HTTP): median of {runs} "
        "deliveries each, interleaved; own = wall minus the time inside the store's calls"
    ]
    for variant in result.wall:
        lines.append(
            f"  {variant:<24}own {result.own(variant):6.3f} ms   in store calls "
            f"{result.median_store(variant):6.3f} ms"
        )
    lines.append(
        f"  ratio runonce own time / {baseline} own time  "
        f"{result.own('runonce') / result.own(baseline):.2f}x (shown, not judged)"
    )
    return "\n".join(lines)


def unique(prefix: str) -> str:
    """A name no earlier delivery used."""
    return f"{prefix}-{uuid.uuid4().hex[:12]}"
