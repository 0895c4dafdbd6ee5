"""`make bench`, overlap policies: Firestore round trips per delivery of `@deduplicated` under
`allow`, `skip` and `wait`, side by side, in one run on the emulator (docs/schedules/overlap.md).

Each delivery goes through a Flask test client to the decorated job, on the real Firestore
emulator; the Firestore client's channel is tapped to count the calls of each delivery by method
(Commit, BatchGetDocuments, ...). A count, not a timing: the claim of a `skip` or `wait` job
creates its job lock in the same Commit as the run, and the completion deletes it in the same
Commit as it finishes the run, so the happy path must cost what `allow` costs. Target: every
policy's happy path (a new run while the job is free: claim + complete) exactly two round trips.
"""

from __future__ import annotations

import logging
import os
import sys
import uuid
from collections import Counter
from datetime import UTC, datetime, timedelta
from typing import Any, cast

import flask

from emulator.firestore import FirestoreEmulator
from emulator.wire import TappedClient, WireTap

PROJECT = "runonce-bench"
POLICIES = ("allow", "skip", "wait")
HAPPY = "new run, job free (claim + complete)"
TARGET = 2


def _headers(job: str, moment: datetime, policy: str) -> dict[str, str]:
    from runonce import contract

    return {
        contract.JOB_HEADER: job,
        contract.TIME_HEADER: moment.strftime("%Y-%m-%dT%H:%M:%SZ"),
        contract.PROJECT_HEADER: PROJECT,
        contract.LOCATION_HEADER: "europe-west1",
        contract.OVERLAP_HEADER: policy,
    }


def _cell(calls: Counter[str], outcome: str) -> str:
    methods = "+".join(f"{count} {method}" for method, count in sorted(calls.items()))
    return f"{sum(calls.values())} ({methods}) {outcome}"


Rows = dict[str, dict[str, tuple[Counter[str], str]]]
"""Per delivery kind, per policy: the calls by method and the answer's outcome."""


def measure(tap: WireTap, client: Any) -> Rows:
    """Deliver each kind of delivery under each policy through `client` (tapped by `tap`)."""
    import runonce
    from runonce.contract import Overlap
    from runonce.core.store import JobLock
    from runonce.scheduler.keys import job_lock
    from runonce.store.firestore import Ledger

    collection = f"bench_overlap_{uuid.uuid4().hex[:8]}"
    handler = runonce.deduplicated(collection=collection, client=client)(lambda request: {"ok": True})
    app = flask.Flask("bench-overlap")
    request = cast(Any, flask.request)
    app.add_url_rule("/", "run", lambda: handler(request._get_current_object()), methods=["POST"])
    http = app.test_client()
    ledger = Ledger(client, collection, timedelta(minutes=10), timedelta(days=1))
    base = datetime.now(UTC).replace(second=0, microsecond=0) - timedelta(hours=1)

    def deliver(headers: dict[str, str]) -> tuple[Counter[str], str]:
        tap.reset()
        answer = http.post("/", headers=headers).get_json()
        return Counter(tap.calls), str(answer["outcome"])

    rows: Rows = {}
    for column, policy in enumerate(POLICIES):
        job = f"bench-{policy}-{uuid.uuid4().hex[:6]}"
        deliver(_headers(job, base - timedelta(minutes=59), policy))  # warm the client's channel
        first = _headers(job, base, policy)
        rows.setdefault(HAPPY, {})[policy] = deliver(first)
        rows.setdefault("duplicate of a completed run", {})[policy] = deliver(first)
        # Another run of the job holds it (its instance still running): claimed with the lock.
        lock = JobLock(job_lock(PROJECT, "europe-west1", job), Overlap.SKIP)
        ledger.claim_locked(f"holder-{column}", {"job": job}, lock)
        second = _headers(job, base + timedelta(minutes=1), policy)
        rows.setdefault("new run while another run holds the job", {})[policy] = deliver(second)
        rows.setdefault("its retry", {})[policy] = deliver(second)
    return rows


def report(rows: Rows) -> tuple[list[str], bool]:
    """The table, side by side, and the verdict line; whether the target is met."""
    width = max(len(name) for name in rows) + 2
    lines = [
        "Overlap policies (@deduplicated, functions-framework's request): Firestore round trips per delivery",
        (" " * width + "".join(f"{policy:<44}" for policy in POLICIES)).rstrip(),
    ]
    for name, cells in rows.items():
        lines.append(
            (f"{name:<{width}}" + "".join(f"{_cell(*cells[policy]):<44}" for policy in POLICIES)).rstrip()
        )
    happy = {policy: sum(rows[HAPPY][policy][0].values()) for policy in POLICIES}
    met = set(happy.values()) == {TARGET}
    lines.append(
        f"verdict: {'target met' if met else 'TARGET MISSED'} (happy path "
        + ", ".join(f"{policy} {count}" for policy, count in happy.items())
        + f" round trips; target {TARGET} each: overlap control adds none)"
    )
    return lines, met


def main() -> int:
    logging.getLogger("runonce").disabled = True  # one JSON line per request would bury the table
    with FirestoreEmulator() as emulator:
        os.environ["FIRESTORE_EMULATOR_HOST"] = emulator.host
        tap = WireTap()
        rows = measure(tap, TappedClient(tap, project=PROJECT))
    lines, met = report(rows)
    print("\n".join(lines))
    return 0 if met else 1


if __name__ == "__main__":
    sys.exit(main())
