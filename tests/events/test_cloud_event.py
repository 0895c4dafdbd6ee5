"""@deduplicated_event under functions_framework.cloud_event: CloudEvents (cloudevents objects, and
once through a real functions-framework app) acked by returning, nacked by raising, identified by
source + id; the store is the real Firestore emulator, dead letters land on the real Pub/Sub one."""

from __future__ import annotations

import base64
import sys
import threading
from datetime import UTC, datetime, timedelta

import pytest
from cloudevents.conversion import to_structured
from cloudevents.http import CloudEvent

from runonce import EventRetry, PermanentError
from runonce.core.event import EventRun
from runonce.core.outcomes import Outcome

BUCKET = "//storage.googleapis.com/projects/_/buckets/invoices"


def storage_event(event_id: str = "evt-1", source: str = BUCKET, time: datetime | None = None) -> CloudEvent:
    """A Cloud Storage object-finalized CloudEvent as Eventarc sends it."""
    return CloudEvent(
        {
            "type": "google.cloud.storage.object.v1.finalized",
            "source": source,
            "id": event_id,
            "subject": "objects/2026/11/invoice-7.pdf",
            "time": (time or datetime.now(UTC)).isoformat().replace("+00:00", "Z"),
        },
        {"bucket": "invoices", "name": "2026/11/invoice-7.pdf", "size": "1024"},
    )


@pytest.fixture
def handler(event_handler):
    """Build the probe under @deduplicated_event with the given options (dead letters to a new
    topic): a CloudEvent function is the decorated function itself."""
    return event_handler


@pytest.mark.both_stores
def test_a_cloud_event_runs_once_and_the_function_returns(store_kind, handler, probe, records):
    handle = handler()
    body = handle(storage_event())
    assert body["outcome"] == "completed"
    [event] = probe.events
    assert event.kind == "cloudevent" and event.id == "evt-1" and event.source == BUCKET
    assert event.json() == {"bucket": "invoices", "name": "2026/11/invoice-7.pdf", "size": "1024"}
    assert event.attributes["type"] == "google.cloud.storage.object.v1.finalized"
    assert event.attributes["subject"] == "objects/2026/11/invoice-7.pdf"
    [run] = probe.runs
    assert isinstance(run, EventRun) and run.event is event and event.delivery_attempt is None
    [record] = records().values()
    assert record["status"] == "completed" and record["event_source"] == BUCKET


@pytest.mark.parametrize("field", ["id", "source"])
@pytest.mark.both_stores
def test_an_overlong_id_or_source_is_rejected_before_anything_is_written(
    store_kind, handler, probe, records, field
):
    event = storage_event(**{"event_id" if field == "id" else "source": "x" * 1025})
    with pytest.raises(EventRetry, match=f"rejected: {field}: 1025 characters, more than the 1024 allowed"):
        handler()(event)
    assert (probe.count, records()) == (0, {})


@pytest.mark.both_stores
def test_a_redelivered_cloud_event_returns_without_running(store_kind, handler, probe):
    handle = handler()
    handle(storage_event())
    assert handle(storage_event())["outcome"] == "duplicate"
    assert probe.count == 1


@pytest.mark.both_stores
def test_the_same_id_from_another_source_is_another_event(store_kind, handler, probe):
    handle = handler()
    handle(storage_event())
    handle(storage_event(source="//storage.googleapis.com/projects/_/buckets/receipts"))
    assert probe.count == 2


@pytest.mark.both_stores
def test_a_pubsub_cloud_event_is_unwrapped_to_the_message(store_kind, handler, probe):
    message = {
        "data": base64.b64encode(b'{"order": 3}').decode(),
        "attributes": {"kind": "order"},
        "messageId": "77",
        "publishTime": datetime.now(UTC).isoformat().replace("+00:00", "Z"),
    }
    event = CloudEvent(
        {
            "type": "google.cloud.pubsub.topic.v1.messagePublished",
            "source": "//pubsub.googleapis.com/projects/runonce-local/topics/orders",
            "id": "77",
        },
        {"message": message, "subscription": "projects/runonce-local/subscriptions/eventarc-sub"},
    )
    handler()(event)
    [seen] = probe.events
    assert seen.json() == {"order": 3} and seen.attributes == {"kind": "order"} and seen.id == "77"


@pytest.mark.both_stores
def test_an_exception_raises_event_retry_so_the_event_is_redelivered_and_the_claim_is_released(
    store_kind, handler, probe, records
):
    handle = handler()
    probe.behaviour = lambda event: 1 / 0
    with pytest.raises(EventRetry) as raised:
        handle(storage_event())
    assert raised.value.answer.outcome is Outcome.RETRY and records() == {}
    probe.behaviour = lambda event: "fine now"
    assert handle(storage_event())["result"] == "fine now"


@pytest.mark.both_stores
def test_an_event_held_by_a_live_lease_raises_event_retry_in_progress(store_kind, handler, probe):
    handle = handler()
    inside, release = threading.Event(), threading.Event()
    probe.behaviour = lambda event: (inside.set(), release.wait(10), "done")[-1]
    worker = threading.Thread(target=handle, args=(storage_event(),))
    worker.start()
    assert inside.wait(10)
    with pytest.raises(EventRetry) as raised:
        handle(storage_event())
    release.set()
    worker.join()
    assert raised.value.answer.outcome is Outcome.IN_PROGRESS and probe.count == 1


def test_a_permanent_failure_is_dead_lettered_and_the_function_returns(pubsub, handler, probe):
    dead = pubsub.topic("dead")
    letters = pubsub.pull_subscription("dead-letters", dead)

    def refuse(event):
        raise PermanentError("not an invoice")

    probe.behaviour = refuse
    body = handler(dead_letter_topic=dead)(storage_event())
    assert body["outcome"] == "failed" and body["dead_lettered"] is True
    [copy] = pubsub.pull(letters, 1)
    assert copy.attributes["runonce_reason"] == "permanent_failure"
    assert copy.attributes["runonce_origin"] == BUCKET and copy.attributes["runonce_event_id"] == "evt-1"
    assert copy.attributes["type"] == "google.cloud.storage.object.v1.finalized"
    assert copy.data == probe.events[0].data


def test_a_too_old_cloud_event_is_dead_lettered_not_run(pubsub, handler, probe):
    dead = pubsub.topic("dead")
    letters = pubsub.pull_subscription("dead-letters", dead)
    old = storage_event(time=datetime.now(UTC) - timedelta(hours=3))
    assert handler(dead_letter_topic=dead, max_event_age=3600)(old)["outcome"] == "too_old"
    [copy] = pubsub.pull(letters, 1)
    assert copy.attributes["runonce_reason"] == "too_old" and probe.count == 0


def test_a_failed_forwarding_raises_so_eventarc_delivers_it_again(pubsub, handler, probe):
    def refuse(event):
        raise PermanentError("not an invoice")

    probe.behaviour = refuse
    with pytest.raises(EventRetry) as raised:
        handler(dead_letter_topic=pubsub.topic_path("missing"))(storage_event())
    assert raised.value.answer.outcome is Outcome.DEAD_LETTER_FAILED


def test_under_functions_framework_returning_acks_200_and_raising_answers_500(
    pubsub, firestore_emulator, collection, probe, monkeypatch, tmp_path
):
    import functions_framework

    monkeypatch.setenv("RUNONCE_COLLECTION", collection)
    monkeypatch.setenv("RUNONCE_DEAD_LETTER_TOPIC", pubsub.topic("dead"))
    source = tmp_path / "main.py"
    source.write_text(
        "import functions_framework\n"
        "from runonce import deduplicated_event\n"
        "from tests.events import test_cloud_event as spec\n\n"
        "@functions_framework.cloud_event\n"
        "@deduplicated_event\n"
        "def handle(event):\n"
        "    return spec.JOB(event)\n"
    )
    monkeypatch.setattr(sys.modules[__name__], "JOB", probe, raising=False)  # what main.py calls
    # create_app writes FUNCTION_TARGET/FUNCTION_SIGNATURE_TYPE into os.environ; keep them here.
    for name in ("FUNCTION_TARGET", "FUNCTION_SIGNATURE_TYPE", "FUNCTION_SOURCE"):
        monkeypatch.delenv(name, raising=False)
    app = functions_framework.create_app("handle", str(source), "cloudevent").test_client()
    headers, body = to_structured(storage_event("ff-1"))
    assert app.post("/", headers=headers, data=body).status_code == 200
    assert app.post("/", headers=headers, data=body).status_code == 200  # the duplicate is acked too
    probe.behaviour = lambda event: 1 / 0
    headers, body = to_structured(storage_event("ff-2"))
    assert app.post("/", headers=headers, data=body).status_code == 500
    assert [event.id for event in probe.events] == ["ff-1", "ff-2"]


@pytest.mark.both_stores
def test_a_cloud_event_time_keeps_its_fraction_to_the_nanosecond(store_kind, handler, probe):
    event = storage_event()
    event["time"] = (datetime.now(UTC) - timedelta(minutes=1)).strftime("%Y-%m-%dt%H:%M:%S.123456789z")
    handler()(event)
    [seen] = probe.events
    assert seen.time.nanosecond == 123456789 and seen.time.microsecond == 123456
    assert probe.runs[0].event.time is seen.time


@pytest.mark.both_stores
def test_a_cloud_event_time_that_is_not_rfc_3339_is_rejected_naming_it(store_kind, handler, probe, records):
    event = storage_event()
    event["time"] = "2026-11-29 03:00:00"
    with pytest.raises(EventRetry, match="rejected: time: "):
        handler()(event)
    assert (probe.count, records()) == (0, {})


def _pubsub_cloud_event(message_id: str = "88") -> CloudEvent:
    """What Eventarc delivers for one Pub/Sub message, whichever trigger delivers it."""
    message = {
        "data": base64.b64encode(b'{"order": 5}').decode(),
        "messageId": message_id,
        "publishTime": datetime.now(UTC).isoformat().replace("+00:00", "Z"),
    }
    return CloudEvent(
        {
            "type": "google.cloud.pubsub.topic.v1.messagePublished",
            "source": "//pubsub.googleapis.com/projects/runonce-local/topics/orders",
            "id": message_id,
        },
        {"message": message, "subscription": "projects/runonce-local/subscriptions/eventarc-x"},
    )


@pytest.mark.parametrize("event", [_pubsub_cloud_event, storage_event], ids=["pubsub topic", "bucket"])
def test_one_event_through_two_triggers_to_two_functions_runs_each_function_once(
    pubsub, handler, probe, records, monkeypatch, event
):
    dead = pubsub.topic("dead")
    monkeypatch.setenv("K_SERVICE", "billing")  # Cloud Run sets it to the function's service name
    billing = handler(dead_letter_topic=dead)
    assert billing(event())["outcome"] == "completed"
    monkeypatch.setenv("K_SERVICE", "audit")
    audit = handler(dead_letter_topic=dead)
    assert audit(event())["outcome"] == "completed"
    assert billing(event())["outcome"] == "duplicate" and audit(event())["outcome"] == "duplicate"
    assert probe.count == 2
    assert sorted(record["event_consumer"] for record in records().values()) == ["audit", "billing"]


def test_the_consumer_option_wins_over_k_service(pubsub, handler, probe, monkeypatch):
    dead = pubsub.topic("dead")
    monkeypatch.setenv("K_SERVICE", "shared-service")
    handler(dead_letter_topic=dead, consumer="invoices")(storage_event())
    handler(dead_letter_topic=dead, consumer="receipts")(storage_event())
    assert probe.count == 2
    assert [run.consumer for run in probe.runs] == ["invoices", "receipts"]


@pytest.mark.both_stores
def test_cloud_event_text_data_with_a_lone_surrogate_runs_with_the_data_as_sent(store_kind, handler, probe):
    event = CloudEvent(
        {"type": "com.example.note", "source": "//example/notes", "id": "n-1"}, "half \ud800 pair"
    )
    assert handler()(event)["outcome"] == "completed"
    assert probe.events[0].data == "half \ud800 pair".encode("utf-8", "surrogatepass")


@pytest.mark.both_stores
def test_a_cloud_event_attribute_that_is_not_utf_8_is_rejected_naming_it(store_kind, handler, probe, records):
    event = storage_event()
    event["tenant"] = "broken \udcff"
    with pytest.raises(EventRetry, match="rejected: tenant: "):
        handler()(event)
    assert (probe.count, records()) == (0, {})
