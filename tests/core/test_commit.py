"""The ledger's direct Commit path (runonce.store._commit) against the client library's public API, both on
the real emulator: the same documents, the same preconditions and errors, the same request
metadata, lost answers recognised the same way; and the public API whenever the client's internals
are not the expected ones."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta, timezone

import pytest
from google.api_core import exceptions as gexc
from google.api_core.retry import Retry, if_exception_type
from google.protobuf.message import Message

from emulator.wire import Fault, TappedClient, WireTap
from runonce.core.store import Claim, StoredResult
from runonce.store._commit import Write, Writes
from runonce.store.firestore import Ledger
from tests.conftest import PROJECT

FIELDS = {
    "job": "nightly-report",
    "schedule_time": "2026-11-29T03:00:00Z",
    "forced": False,
    "project": "acme-prod",
    "location": None,
    "weight": 0.25,
    "priority": 7,
    "due": datetime(2026, 11, 29, 3, 0, 0, 123456, tzinfo=UTC),
}


class RecordingTap(WireTap):
    """A wire tap that also keeps, per unary call, the method, the request's type and the metadata."""

    def __init__(self):
        super().__init__()
        self.sent: list[tuple[str, type, frozenset]] = []

    def intercept_unary_unary(self, continuation, client_call_details, request):
        method = client_call_details.method.rsplit("/", 1)[-1]
        self.sent.append((method, type(request), frozenset(client_call_details.metadata or ())))
        return super().intercept_unary_unary(continuation, client_call_details, request)


class _GapicWithoutTransport:
    """The client's gapic client as another library version might have it: no `transport`."""

    def __init__(self, api):
        self._api = api

    def __getattr__(self, name):
        if name == "transport":
            raise AttributeError(name)
        return getattr(self._api, name)


class ClientWithoutChannel(TappedClient):
    """A client whose internals are not the ones the direct path expects."""

    @property
    def _firestore_api(self):
        return _GapicWithoutTransport(super()._firestore_api)


@pytest.fixture
def tap():
    return RecordingTap()


@pytest.fixture
def direct_client(firestore_emulator, tap):
    return TappedClient(tap, project=PROJECT)


@pytest.fixture
def public_client(firestore_emulator, tap):
    return ClientWithoutChannel(tap, project=PROJECT)


@pytest.fixture(params=["direct", "public"])
def any_client(request, direct_client, public_client):
    """Each test using it runs once per path."""
    return direct_client if request.param == "direct" else public_client


def _ledger(client, collection) -> Ledger:
    return Ledger(client, collection, timedelta(seconds=120), timedelta(days=7))


def _typed(record: dict) -> dict:
    """The record without the attempt's random id, each value with its type (and a timestamp's
    nanoseconds, which datetime equality ignores)."""
    return {
        name: (type(value), value, getattr(value, "nanosecond", None))
        for name, value in record.items()
        if name != "attempt_id"
    }


def _call() -> dict:
    return {"timeout": 10.0, "retry": None}


def test_a_client_as_pinned_writes_directly(direct_client):
    assert Writes(direct_client).direct


def test_a_client_without_the_expected_internals_writes_through_the_public_api_and_says_so(
    public_client, log_lines
):
    log_lines()
    assert not Writes(public_client).direct
    [(_, line)] = log_lines()
    assert "public API" in line["message"] and "transport" in line["message"]


def test_the_happy_path_sends_both_writes_directly_and_nothing_else(direct_client, collection, tap, clock):
    ledger = _ledger(direct_client, collection)
    claim = ledger.claim("run-1", dict(FIELDS))
    assert ledger.complete(claim, {"rows": 42})
    assert [(method, issubclass(kind, Message)) for method, kind, _ in tap.sent] == [
        ("Commit", True),
        ("Commit", True),
    ]
    assert tap.total() == 2


def test_both_paths_send_the_same_request_metadata(direct_client, public_client, collection, tap):
    Writes(direct_client).create(direct_client.collection(collection).document("a"), {"n": 1}, **_call())
    public_client.collection(collection).document("b").create({"n": 1}, **_call())
    [(_, direct_type, direct_metadata), (_, public_type, public_metadata)] = tap.sent
    assert issubclass(direct_type, Message) and not issubclass(public_type, Message)
    assert direct_metadata == public_metadata


@pytest.mark.parametrize("finish", ["complete", "complete_unstorable", "fail"])
def test_both_paths_store_identical_records(direct_client, public_client, collection, clock, finish):
    """Same fields, same types (timestamps included), claim and finishing write alike."""
    records = []
    for client, key in ((direct_client, "direct"), (public_client, "public")):
        ledger = _ledger(client, collection)
        claim = ledger.claim(key, dict(FIELDS))
        assert isinstance(claim, Claim)
        after_claim = ledger.get(key)
        if finish == "complete":
            assert ledger.complete(claim, {"rows": [1, 2], "note": "é"})
        elif finish == "complete_unstorable":
            assert ledger.record_result(claim, StoredResult.of({1, 2})) is not None
        else:
            assert ledger.fail(claim, "upstream refused: 400")
        records.append((after_claim, ledger.get(key)))
    (direct_claimed, direct_finished), (public_claimed, public_finished) = records
    assert _typed(direct_claimed) == _typed(public_claimed)
    assert _typed(direct_finished) == _typed(public_finished)
    assert type(direct_finished["claimed_at"]) is type(public_finished["claimed_at"])


def test_fields_the_direct_path_does_not_encode_are_written_by_the_public_api_identically(
    direct_client, public_client, collection, clock
):
    odd = {**FIELDS, "labels": {"team": "reports"}, "tags": ["a", "b"], "blob": b"\x00\x01"}
    for client, key in ((direct_client, "direct"), (public_client, "public")):
        ledger = _ledger(client, collection)
        assert ledger.complete(ledger.claim(key, dict(odd)), "ok")
    assert _typed(_ledger(direct_client, collection).get("direct")) == _typed(
        _ledger(public_client, collection).get("public")
    )


def test_both_paths_return_the_update_time_the_store_holds_to_the_nanosecond(any_client, collection):
    doc = any_client.collection(collection).document("a")
    written = Writes(any_client).create(doc, {"n": 1}, **_call())
    stored = doc.get().update_time
    assert type(written) is type(stored) and written == stored
    assert written.nanosecond == stored.nanosecond


def test_create_on_an_existing_document_is_already_exists_on_both_paths(any_client, collection):
    doc = any_client.collection(collection).document("a")
    writes = Writes(any_client)
    writes.create(doc, {"n": 1}, **_call())
    with pytest.raises(gexc.AlreadyExists):
        writes.create(doc, {"n": 2}, **_call())
    assert doc.get().to_dict() == {"n": 1}


def test_an_update_with_a_stale_update_time_is_failed_precondition_on_both_paths(any_client, collection):
    doc = any_client.collection(collection).document("a")
    writes = Writes(any_client)
    first = writes.create(doc, {"n": 1}, **_call())
    second = writes.update(doc, {"n": 2}, first, **_call())
    assert second > first
    with pytest.raises(gexc.FailedPrecondition):
        writes.update(doc, {"n": 3}, first, **_call())
    assert doc.get().to_dict() == {"n": 2}


def test_an_update_of_a_deleted_document_fails_on_both_paths_and_writes_nothing(any_client, collection):
    doc = any_client.collection(collection).document("a")
    writes = Writes(any_client)
    first = writes.create(doc, {"n": 1}, **_call())
    doc.delete()
    with pytest.raises((gexc.FailedPrecondition, gexc.NotFound)):
        writes.update(doc, {"n": 2}, first, **_call())
    assert not doc.get().exists


def test_an_update_changes_only_the_fields_it_names_on_both_paths(any_client, collection):
    doc = any_client.collection(collection).document("a")
    writes = Writes(any_client)
    first = writes.create(doc, {"kept": "yes", "status": "in_progress"}, **_call())
    writes.update(doc, {"status": "completed"}, first, **_call())
    assert doc.get().to_dict() == {"kept": "yes", "status": "completed"}


def test_a_claim_whose_answer_is_lost_is_recognised_as_ours_on_both_paths(any_client, collection, tap, clock):
    ledger = _ledger(any_client, collection)
    tap.inject(Fault("Commit", after_send=True))  # the create lands, its answer does not
    claim = ledger.claim("run-1", dict(FIELDS))
    assert isinstance(claim, Claim)
    assert tap.calls["Commit"] == 2  # the retried create met our own record
    assert ledger.complete(claim, "ok")
    assert ledger.get("run-1")["status"] == "completed"


def test_a_completion_whose_answer_is_lost_is_recognised_as_ours_on_both_paths(
    any_client, collection, tap, clock
):
    ledger = _ledger(any_client, collection)
    claim = ledger.claim("run-1", dict(FIELDS))
    tap.inject(Fault("Commit", after_send=True))  # the completion lands, its answer does not
    assert ledger.complete(claim, {"rows": 42})
    assert tap.calls["Commit"] == 3  # claim, completion, its retry (refused: the record moved on)
    record = ledger.get("run-1")
    assert record["status"] == "completed" and record["result_json"] == '{"rows":42}'


def test_a_claim_taken_over_cannot_be_completed_by_its_old_holder_on_both_paths(
    any_client, collection, clock
):
    ledger = _ledger(any_client, collection)
    old = ledger.claim("run-1", dict(FIELDS))
    clock.advance(121)  # the lease expires
    new = ledger.claim("run-1", dict(FIELDS))
    assert isinstance(old, Claim) and isinstance(new, Claim) and new.attempt == 2
    assert not ledger.complete(old, "stale")
    assert ledger.complete(new, "fresh")
    assert ledger.get("run-1")["result_json"] == '"fresh"'


def test_a_claim_written_directly_can_be_released_by_its_update_time(direct_client, collection, clock):
    ledger = _ledger(direct_client, collection)
    claim = ledger.claim(f"run-{uuid.uuid4().hex[:6]}", dict(FIELDS))
    assert ledger.release(claim)
    assert ledger.get(claim.key) is None


@pytest.mark.fast
@pytest.mark.parametrize(
    "value",
    [
        datetime(2026, 11, 29, 3, 0, 0, 123456, tzinfo=UTC),
        datetime(1969, 12, 31, 23, 59, 59, 999999, tzinfo=UTC),
        datetime(1, 1, 1, tzinfo=UTC),
        datetime(9999, 12, 31, 23, 59, 59, 999999, tzinfo=UTC),  # where the library's float product rounds
        datetime(2026, 11, 29, 3, 0, 0, 5),  # naive: UTC for the library
        datetime(2026, 11, 29, 4, 0, 0, 5, tzinfo=timezone(timedelta(hours=1))),
    ],
)
def test_the_direct_path_encodes_a_datetime_as_the_library_does(value):
    from google.cloud.firestore_v1 import _helpers
    from google.cloud.firestore_v1.types import Value

    from runonce.store._commit import _encode

    ours = Value.pb()()
    _encode(value, ours)
    assert ours == Value.pb(_helpers.encode_value(value))


def _retry_within(seconds: float) -> Retry:
    """A retry of unavailable calls, about 50 ms apart, for `seconds` in all."""
    return Retry(
        predicate=if_exception_type(gexc.ServiceUnavailable), initial=0.05, maximum=0.05, timeout=seconds
    )


def test_tries_after_a_failed_first_get_the_time_left_of_the_first_on_both_paths(any_client, collection, tap):
    """The direct path sends its first try bare: the tries after it get what the gapic wrapper
    gives them, the time left since the first began."""
    doc = any_client.collection(collection).document("a")
    tap.inject(Fault("Commit", hang=1.0, times=2))  # unavailable after a second, twice
    Writes(any_client).create(doc, {"n": 1}, timeout=10.0, retry=_retry_within(8.0))
    timeouts = [timeout for method, timeout in tap.deadlines if method == "Commit"]
    assert len(timeouts) == 3 and timeouts[0] == pytest.approx(10.0, abs=0.01)
    assert timeouts[1] is not None and timeouts[1] < 9.01  # at least a second gone: the first try's
    assert timeouts[2] is not None and timeouts[2] < 8.01
    assert doc.get().to_dict() == {"n": 1}


def test_the_retry_deadline_counts_from_the_first_try_on_both_paths(any_client, collection, tap):
    """A first try that fails after 1 s leaves 0.6 s of a 1.6 s retry: one try more, not two."""
    doc = any_client.collection(collection).document("a")
    tap.inject(Fault("Commit", hang=1.0, times=5))
    with pytest.raises(gexc.RetryError):
        Writes(any_client).create(doc, {"n": 1}, timeout=10.0, retry=_retry_within(1.6))
    assert tap.calls["Commit"] == 2
    assert not doc.get().exists


def test_apply_writes_what_commit_writes_and_fails_alike_on_both_paths(any_client, collection):
    """`apply` is `commit` without reading an update time from the answer."""
    doc = any_client.collection(collection).document("a")
    writes = Writes(any_client)
    first = writes.commit([Write(doc, {"n": 1})], **_call())
    assert writes.apply([Write(doc, {"n": 2}, first)], **_call()) is None
    with pytest.raises(gexc.FailedPrecondition):
        writes.apply([Write(doc, {"n": 3}, first)], **_call())
    assert doc.get().to_dict() == {"n": 2}
