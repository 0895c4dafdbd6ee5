"""`make bench`, event path: Firestore round trips per outcome of `@deduplicated_event`.

Push envelopes go through a Flask test client to the decorated function, on the real Firestore
and Pub/Sub emulators; the Firestore client's channel is tapped to count round trips (and the
dead-letter publishes are counted from the answers). Target: exactly two round trips on the happy
path, as for scheduled runs. Also prints the median time to handle one new event.
"""

from __future__ import annotations

import base64
import json
import logging
import os
import statistics
import sys
import time
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any, cast

import flask

from emulator.firestore import FirestoreEmulator
from emulator.pubsub import PubSubEmulator
from emulator.wire import TappedClient, WireTap

PROJECT = "runonce-bench"
RUNS = int(os.environ.get("BENCH_EVENT_RUNS", "200"))
WARMUP = int(os.environ.get("BENCH_WARMUP", "300"))


def _envelope(message_id: str, age: timedelta = timedelta(0)) -> str:
    published = (datetime.now(UTC) - age).isoformat().replace("+00:00", "Z")
    message = {"data": base64.b64encode(b"{}").decode(), "messageId": message_id, "publishTime": published}
    return json.dumps({"message": message, "subscription": f"projects/{PROJECT}/subscriptions/bench"})


def main() -> int:
    from google.cloud.pubsub_v1 import PublisherClient

    import runonce

    logging.getLogger("runonce").disabled = True  # one JSON line per request would bury the table
    with FirestoreEmulator() as firestore_emulator, PubSubEmulator() as pubsub_emulator:
        os.environ["FIRESTORE_EMULATOR_HOST"] = firestore_emulator.host
        os.environ["PUBSUB_EMULATOR_HOST"] = pubsub_emulator.host
        dead = PublisherClient().create_topic(name=f"projects/{PROJECT}/topics/dead").name
        tap = WireTap()
        client = TappedClient(tap, project=PROJECT)
        state = {"fail": False}

        def job(event):
            if state["fail"]:
                raise runonce.PermanentError("bench: permanent failure")
            return {"ok": True}

        handler = runonce.deduplicated_event(
            collection=f"bench_events_{uuid.uuid4().hex[:8]}",
            client=client,
            dead_letter_topic=dead,
            max_event_age=3600,
        )(job)
        app = flask.Flask("bench-events")
        # The decorated view gets the request itself, as functions-framework hands it, not Flask's proxy.
        request = cast(Any, flask.request)
        app.add_url_rule("/", "push", lambda: handler(request._get_current_object()), methods=["POST"])
        http = app.test_client()

        def push(body: str) -> dict:
            answer = http.post("/", data=body, content_type="application/json").json
            assert isinstance(answer, dict), f"not a JSON object: {answer!r}"
            return answer

        for warmup in range(WARMUP):
            push(_envelope(f"warm-{warmup}"))
        samples = []
        for run in range(RUNS):
            started = time.perf_counter()
            push(_envelope(f"run-{run}"))
            samples.append((time.perf_counter() - started) * 1000)

        def trips(body: str) -> tuple[int, str, bool]:
            tap.reset()
            answer = push(body)
            return tap.total(), answer["outcome"], bool(answer.get("dead_lettered"))

        rows = {"completed (claim + complete)": trips(_envelope("rt-1"))}
        rows["duplicate of a completed event"] = trips(_envelope("rt-1"))
        state["fail"] = True
        rows["permanent failure (+1 publish)"] = trips(_envelope("rt-2"))
        rows["duplicate of a dead-lettered one"] = trips(_envelope("rt-2"))
        state["fail"] = False
        rows["too old (+1 publish)"] = trips(_envelope("rt-3", age=timedelta(hours=2)))

    print(
        f"Event path (@deduplicated_event, Pub/Sub push), median of {RUNS} new events after {WARMUP} warm-up"
    )
    print(
        f"  time to handle one new event (test client, store included) {statistics.median(samples):8.2f} ms"
    )
    print("Firestore round trips per outcome")
    for name, (count, outcome, dead_lettered) in rows.items():
        print(f"  {name:<36}{count:>4}   outcome {outcome}{', dead-lettered' if dead_lettered else ''}")
    happy = rows["completed (claim + complete)"][0]
    met = happy == 2
    print(f"verdict: {'target met' if met else 'TARGET MISSED'} (event happy path {happy} round trips)")
    return 0 if met else 1


if __name__ == "__main__":
    sys.exit(main())
