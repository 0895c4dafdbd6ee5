"""The dead-letter copy of any original Pub/Sub can deliver: attributes named like the publish
call's arguments, a hundred attributes of the largest size, reserved `goog` keys, ordering keys,
ten megabytes of data, an error of multi-byte text. Each copy is read back from the real Pub/Sub
emulator and checked against Pub/Sub's documented limits by the test itself (the emulator
enforces none of them), and `read_copy` must give back the original exactly."""

from __future__ import annotations

import pytest
from cloudevents.http import CloudEvent
from google.pubsub_v1.types import PublishRequest, PubsubMessage

import runonce
from runonce import PermanentError
from runonce.events.deadletter import read_copy

from .conftest import envelope, post

# https://cloud.google.com/pubsub/quotas#resource_limits, and the client's publish request limit.
LIMITS = {"attributes": 100, "key_bytes": 256, "value_bytes": 1024, "request_bytes": 10_000_000}


def within_pubsub_limits(topic: str, message) -> list[str]:
    """Every limit the copy breaks (an empty list: Pub/Sub would accept it)."""
    attributes = dict(message.attributes)
    broken = []
    if len(attributes) > LIMITS["attributes"]:
        broken.append(f"{len(attributes)} attributes")
    for key, value in attributes.items():
        if len(key.encode()) > LIMITS["key_bytes"]:
            broken.append(f"key of {len(key.encode())} bytes")
        if len(value.encode()) > LIMITS["value_bytes"]:
            broken.append(f"{key}: value of {len(value.encode())} bytes")
        if key.lower().startswith("goog"):
            broken.append(f"reserved key {key}")
    request = PublishRequest(topic=topic, messages=[PubsubMessage(data=message.data, attributes=attributes)])
    size = PublishRequest.pb(request).ByteSize()
    if size > LIMITS["request_bytes"]:
        broken.append(f"publish request of {size} bytes")
    return broken


@pytest.fixture
def refused(pubsub, push_app, probe):
    """Post one envelope whose job fails permanently; (answer, the copies on the dead-letter topic)."""

    def send(body: dict, error: str = "refused"):
        dead = pubsub.topic("dead")
        letters = pubsub.pull_subscription("dead-letters", dead)

        def refuse(event):
            raise PermanentError(error)

        probe.behaviour = refuse
        response = post(push_app(dead_letter_topic=dead).test_client(), body)
        copies = pubsub.pull(letters, 1) if response.status_code == 200 else []
        return dead, response, copies

    return send


def _body(data: bytes = b'{"order": 7}', attributes: dict | None = None, **message) -> dict:
    body = envelope(data=data, attributes=attributes)
    body["message"].update(message)
    return body


def _copy_of(copies: list) -> PubsubMessage:
    [copy] = [copy for copy in copies if "runonce_copy_message_id" not in copy.attributes]
    return copy


@pytest.mark.parametrize("name", ["topic", "data", "retry", "timeout", "ordering_key"])
def test_an_attribute_named_like_a_publish_argument_is_copied_as_it_is(refused, records, name):
    attributes = {name: "the user's value", "kind": "order"}
    dead, response, copies = refused(_body(attributes=attributes))
    assert response.status_code == 200 and response.json["dead_lettered"] is True
    copy = _copy_of(copies)
    assert within_pubsub_limits(dead, copy) == []
    assert (
        copy.attributes[name] == "the user's value"
        and copy.attributes["runonce_reason"] == "permanent_failure"
    )
    assert read_copy(copy.data, copy.attributes).attributes == attributes
    [record] = records().values()
    assert record["dead_letter_form"] == "plain"


def test_a_hundred_attributes_of_the_largest_size_are_copied_whole_within_the_limits(refused, records):
    attributes = {
        f"{n:03d}".ljust(256, "k"): "é" * 512 for n in range(100)
    }  # 256-byte keys, 1,024-byte values
    dead, response, copies = refused(_body(attributes=attributes))
    assert response.json["outcome"] == "failed" and response.json["dead_lettered"] is True
    copy = _copy_of(copies)
    assert within_pubsub_limits(dead, copy) == []
    assert copy.attributes["runonce_reason"] == "permanent_failure"
    original = read_copy(copy.data, copy.attributes)
    assert original.attributes == attributes and original.data == b'{"order": 7}'
    assert next(iter(records().values()))["dead_letter_form"] == "wrapped"


def test_reserved_goog_attributes_that_pubsub_adds_are_kept_inside_the_copy(refused):
    # A topic with a schema stamps these on every message it delivers (nodejs-pubsub's
    # Schema.metadataFromMessage reads them); publishing them again is refused.
    attributes = {"googclient_schemaname": "projects/p/schemas/orders", "googclient_schemaencoding": "JSON"}
    dead, _, copies = refused(_body(attributes={**attributes, "kind": "order"}))
    copy = _copy_of(copies)
    assert within_pubsub_limits(dead, copy) == []
    assert read_copy(copy.data, copy.attributes).attributes == {**attributes, "kind": "order"}


def test_an_original_with_runonce_attributes_of_its_own_is_given_back_exactly(refused):
    attributes = {"runonce_reason": "the user's", "runonce_run_key": "theirs too"}
    dead, _, copies = refused(_body(attributes=attributes))
    copy = _copy_of(copies)
    assert within_pubsub_limits(dead, copy) == []
    assert copy.attributes["runonce_reason"] == "permanent_failure"
    assert read_copy(copy.data, copy.attributes).attributes == attributes


def test_the_ordering_key_is_kept_for_the_replay(refused):
    dead, _, copies = refused(_body(orderingKey="customer-42"))
    copy = _copy_of(copies)
    assert within_pubsub_limits(dead, copy) == [] and copy.ordering_key == ""
    original = read_copy(copy.data, copy.attributes)
    assert original.ordering_key == "customer-42" and original.data == b'{"order": 7}'


def test_an_error_of_multi_byte_text_is_cut_to_the_value_limit_in_bytes(refused):
    dead, _, copies = refused(_body(), error="€😀" * 1000)
    copy = _copy_of(copies)
    assert within_pubsub_limits(dead, copy) == []
    error = copy.attributes["runonce_error"]
    assert error.startswith("€😀€😀") and error.endswith("bytes, cut]") and len(error.encode()) <= 1024


def _data_filling(topic: str, attributes: dict, spare: int) -> bytes:
    """Data that brings one message to `topic` to `spare` bytes under the publish request limit."""
    size = LIMITS["request_bytes"] - spare
    for _ in range(3):  # the length prefixes grow with the data: settle them
        probe = PublishRequest(topic=topic, messages=[PubsubMessage(data=b"x" * size, attributes=attributes)])
        size -= PublishRequest.pb(probe).ByteSize() - (LIMITS["request_bytes"] - spare)
    return bytes(range(256)) * (size // 256) + b"\0" * (size % 256)


@pytest.mark.parametrize(("spare", "form"), [(2000, "plain"), (0, "bare")], ids=["under 10 MB", "at 10 MB"])
def test_ten_megabytes_of_data_are_copied_within_the_limits_with_the_reason(
    pubsub, refused, records, spare, form
):
    attributes = {"kind": "order"}
    # The original topic's name is as long as the dead-letter topic's: at 10 MB it had no room left.
    data = _data_filling(pubsub.topic_path("dead"), attributes, spare)
    dead, response, copies = refused(_body(data=data, attributes=attributes))
    assert response.json["dead_lettered"] is True
    copy = _copy_of(copies)
    assert within_pubsub_limits(dead, copy) == []
    assert read_copy(copy.data, copy.attributes) == read_copy(data, attributes)
    [record] = records().values()
    assert record["dead_letter_form"] == form and record["dead_letter_message_id"] == copy.message_id
    reasons = [dict(message.attributes) for message in copies if "runonce_reason" in message.attributes]
    [reason] = reasons  # on the copy itself, or on the note that names it
    assert reason["runonce_reason"] == "permanent_failure"
    assert reason.get("runonce_copy_message_id", copy.message_id) == copy.message_id


def test_an_attribute_that_is_not_utf_8_is_rejected_before_the_job_runs(push_app, probe, records):
    body = envelope(attributes={"kind": "\ud800"})
    response = post(push_app().test_client(), body)
    assert response.status_code == 400 and response.json["error"].startswith("message.attributes: ")
    assert probe.count == 0 and records() == {}


def test_a_cloud_event_attribute_over_the_value_limit_is_copied_within_the_limits(
    pubsub, tapped_client, collection, probe
):
    dead = pubsub.topic("dead")
    letters = pubsub.pull_subscription("dead-letters", dead)

    def refuse(event):
        raise PermanentError("not an invoice")

    probe.behaviour = refuse
    subject = "objects/" + "a" * 1020  # an object name may be 1,024 bytes: the subject is longer
    event = CloudEvent(
        {
            "type": "google.cloud.storage.object.v1.finalized",
            "source": "//storage.googleapis.com/projects/_/buckets/invoices",
            "id": "evt-9",
            "subject": subject,
        },
        {"name": subject[8:]},
    )
    handler = runonce.deduplicated_event(collection=collection, client=tapped_client, dead_letter_topic=dead)(
        probe
    )
    assert handler(event)["dead_lettered"] is True
    [copy] = pubsub.pull(letters, 1)
    assert within_pubsub_limits(dead, copy) == []
    assert read_copy(copy.data, copy.attributes).attributes["subject"] == subject


def test_an_original_with_no_room_even_for_its_bare_copy_is_kept_by_pubsub(pubsub, refused, records):
    # Published to a topic whose name is shorter than the dead-letter topic's, right at the limit.
    data = _data_filling("projects/runonce-local/topics/o", {}, 0)
    _, response, _ = refused(_body(data=data, attributes={}))
    assert response.status_code == 500 and response.json["outcome"] == "dead_letter_failed"
    assert "within Pub/Sub's limits" in response.json["error"]
    [record] = records().values()
    assert record["status"] == "failed" and "dead_letter_failed_at" in record
