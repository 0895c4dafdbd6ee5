"""The three functions `make bench` serves end to end, each from its own functions-framework process.

They run the same job body (a small dict, no store access), so their latencies differ only by
what deduplicates them:

- `floor`: no deduplication at all, the cost of functions-framework, HTTP and the body;
- `seed_pattern`: the seed's handler, the raw header string hashed and the run claimed and
  completed with two Firestore transactions (benchmarks.seed_baseline);
- `deduplicated_job`: the same body under runonce's `@deduplicated`.

With BENCH_PROFILE=<path>, `deduplicated_job` runs under cProfile (only the handler, not the
server around it) and a request to /profile writes the statistics gathered so far to <path>.
"""

from __future__ import annotations

import cProfile
import hashlib
import os
from datetime import timedelta
from typing import Any

import functions_framework
from google.cloud import firestore

from benchmarks.seed_baseline import SeedLedger
from runonce import deduplicated

_seed: SeedLedger | None = None


def job_body(request) -> dict:
    return {"published": True}


@functions_framework.http
def floor(request):
    """The job body alone."""
    return job_body(request)


@functions_framework.http
def seed_pattern(request):
    """The job body behind the seed's two transactions."""
    global _seed
    if _seed is None:
        _seed = seed_ledger(firestore.Client())
    return seed_answer(_seed, request)


def seed_ledger(client: firestore.Client) -> SeedLedger:
    """The seed's ledger, as `seed_pattern` uses it."""
    return SeedLedger(client, "seed_runs", timedelta(minutes=15))


def seed_answer(seed: SeedLedger, request) -> Any:
    """The seed's handler: the raw headers hashed, claimed, the body run, completed."""
    raw = request.headers.get("X-CloudScheduler-JobName", "") + request.headers.get(
        "X-CloudScheduler-ScheduleTime", ""
    )
    key = hashlib.sha256(raw.encode()).hexdigest()
    attempt = seed.claim(key)
    if attempt is None:
        return {"outcome": "duplicate"}, 409
    result = job_body(request)
    seed.complete(key, attempt)
    return {"outcome": "completed", "result": result}


@deduplicated
def _deduplicated(request):
    return job_body(request)


_profile_path = os.environ.get("BENCH_PROFILE")
_profiler = cProfile.Profile() if _profile_path else None


@functions_framework.http
def deduplicated_job(request):
    """The job body under `@deduplicated` (profiled when BENCH_PROFILE is set)."""
    if _profiler is None:
        return _deduplicated(request)
    if request.path == "/profile":
        _profiler.dump_stats(_profile_path)
        return {"profile": _profile_path}
    _profiler.enable()
    try:
        return _deduplicated(request)
    finally:
        _profiler.disable()
