"""An event's two happy-path writes go to Firestore as direct Commit requests, as a scheduled run's
do (runonce.store._commit), the event's time (a DatetimeWithNanoseconds) included, and that time is
stored as the publish time. On the real Firestore emulator, through a tapped client."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from google.protobuf.message import Message

from emulator.wire import WireTap

from .conftest import envelope, post


class RecordingTap(WireTap):
    """A wire tap that also keeps, per unary call, the method and the request's type."""

    def __init__(self):
        super().__init__()
        self.sent: list[tuple[str, type]] = []

    def reset(self) -> None:
        super().reset()
        self.sent.clear()

    def intercept_unary_unary(self, continuation, client_call_details, request):
        self.sent.append((client_call_details.method.rsplit("/", 1)[-1], type(request)))
        return super().intercept_unary_unary(continuation, client_call_details, request)


@pytest.fixture
def tap() -> RecordingTap:
    return RecordingTap()


def test_both_writes_of_a_new_event_are_direct_commit_requests(push_app, tap):
    client = push_app().test_client()
    post(client, envelope(message_id="warm"))
    tap.reset()
    assert post(client, envelope(message_id="counted")).json["outcome"] == "completed"
    # A plain protobuf is the direct path; the public API hands the channel a proto-plus message.
    assert [(method, issubclass(kind, Message)) for method, kind in tap.sent] == [
        ("Commit", True),
        ("Commit", True),
    ]


def test_the_event_time_written_directly_is_the_publish_time(push_app, records):
    published = datetime.now(UTC).replace(microsecond=123456) - timedelta(seconds=5)
    body = envelope(message_id="timed")
    body["message"]["publishTime"] = published.strftime("%Y-%m-%dT%H:%M:%S.%f") + "789Z"
    assert post(push_app().test_client(), body).json["outcome"] == "completed"
    [record] = records().values()
    # Firestore keeps microseconds: the 789 nanoseconds are not stored, by either write path.
    assert record["event_time"] == published
