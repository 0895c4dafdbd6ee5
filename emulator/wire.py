"""A Firestore client whose gRPC channel to the emulator is tapped: it counts round trips and
can inject transport faults, while every real call still reaches the real emulator.

This is how the tests make a completion write hiccup and how the benchmark counts round trips,
without replacing the store with a fake.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from dataclasses import dataclass

import grpc
from google.cloud import firestore


class InjectedRpcError(grpc.RpcError, grpc.Future, grpc.Call):
    """A failed call produced by the tap, shaped like the ones gRPC itself returns to an
    interceptor, so the client library maps it to the matching google.api_core exception."""

    def __init__(self, code: grpc.StatusCode, details: str):
        super().__init__()
        self._code = code
        self._details = details

    def code(self) -> grpc.StatusCode:
        return self._code

    def details(self) -> str:
        return self._details

    def result(self, timeout=None):
        raise self

    def __iter__(self):  # as a failed streaming call (a read): its first message raises
        return self

    def __next__(self):
        raise self

    def exception(self, timeout=None):
        return self

    def traceback(self, timeout=None):
        return None

    def add_done_callback(self, fn):
        fn(self)

    def cancel(self):
        return False

    def cancelled(self):
        return False

    def running(self):
        return False

    def done(self):
        return True

    def is_active(self):
        return False

    def time_remaining(self):
        return None

    def add_callback(self, callback):
        return False

    def initial_metadata(self):
        return None

    def trailing_metadata(self):
        return None


@dataclass
class Fault:
    """Fail the next `times` calls of `method` with `code`; `after_send` lets them reach the store
    first, so the write happens but its answer is lost.

    `hang` holds each call that many seconds first, as a hung store would. A caller's deadline
    that passes sooner fails the call with DEADLINE_EXCEEDED at that deadline; with `after_send`
    the call still reaches the store when the hang ends: a write that lands after its caller gave
    up. A hang shorter than the deadline only delays the call, which then fails with `code`."""

    method: str
    code: grpc.StatusCode = grpc.StatusCode.UNAVAILABLE
    times: int = 1
    after_send: bool = False
    hang: float = 0.0


class WireTap(grpc.UnaryUnaryClientInterceptor, grpc.UnaryStreamClientInterceptor):
    """Counts calls per Firestore method name (Commit, BatchGetDocuments, ...), records each call's
    deadline, and injects faults into unary calls (Commit, BeginTransaction, Rollback) and into
    streaming reads (BatchGetDocuments, RunQuery; these fail before reaching the store)."""

    def __init__(self):
        self.calls: Counter[str] = Counter()
        self.deadlines: list[tuple[str, float | None]] = []
        """(method, the caller's timeout in seconds or None) of every call, in order."""
        self._faults: list[Fault] = []
        self._lock = threading.Lock()

    def inject(self, fault: Fault) -> None:
        """Arm a fault for the next matching calls."""
        with self._lock:
            self._faults.append(fault)

    def reset(self) -> None:
        """Forget counts and armed faults."""
        with self._lock:
            self.calls.clear()
            self.deadlines.clear()
            self._faults.clear()

    def total(self) -> int:
        """Round trips so far."""
        return sum(self.calls.values())

    def _take_fault(self, method: str, timeout: float | None) -> Fault | None:
        with self._lock:
            self.calls[method] += 1
            self.deadlines.append((method, timeout))
            for fault in self._faults:
                if fault.method == method and fault.times > 0:
                    fault.times -= 1
                    return fault
        return None

    def intercept_unary_unary(self, continuation, client_call_details, request):
        method = client_call_details.method.rsplit("/", 1)[-1]
        fault = self._take_fault(method, client_call_details.timeout)
        if fault is not None and fault.hang:
            timeout = client_call_details.timeout
            if timeout is not None and timeout < fault.hang:
                if fault.after_send:
                    late = threading.Timer(fault.hang, continuation, (client_call_details, request))
                    late.daemon = True
                    late.start()
                time.sleep(timeout)
                return InjectedRpcError(grpc.StatusCode.DEADLINE_EXCEEDED, f"injected hang: {method}")
            time.sleep(fault.hang)
        if fault is not None and not fault.after_send:
            return InjectedRpcError(fault.code, f"injected before send: {method}")
        outcome = continuation(client_call_details, request)
        if fault is not None and outcome.exception() is None:
            return InjectedRpcError(fault.code, f"injected after the store applied it: {method}")
        return outcome

    def intercept_unary_stream(self, continuation, client_call_details, request):
        method = client_call_details.method.rsplit("/", 1)[-1]
        fault = self._take_fault(method, client_call_details.timeout)
        if fault is not None:  # a read: it fails (after its hang) and never reaches the store
            timeout = client_call_details.timeout
            if fault.hang and timeout is not None and timeout < fault.hang:
                time.sleep(timeout)
                return InjectedRpcError(grpc.StatusCode.DEADLINE_EXCEEDED, f"injected hang: {method}")
            time.sleep(fault.hang)
            return InjectedRpcError(fault.code, f"injected before send: {method}")
        return continuation(client_call_details, request)


class TappedClient(firestore.Client):
    """A firestore.Client on the emulator whose channel goes through `tap`."""

    def __init__(self, tap: WireTap, **kwargs):
        super().__init__(**kwargs)
        self.tap = tap

    def _emulator_channel(self, transport):
        if self._emulator_host is None:
            raise RuntimeError("TappedClient only talks to the emulator: set FIRESTORE_EMULATOR_HOST")
        return grpc.intercept_channel(super()._emulator_channel(transport), self.tap)
