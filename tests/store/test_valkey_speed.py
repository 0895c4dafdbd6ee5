"""What the Valkey store's speed-ups must keep (benchmarks.valkey): a field's stored text is the
JSON the plain encoder writes, and the job's index outlives every record it lists, as each write
moves the record's expiry, with no ZADD when the record's place in it is unchanged."""

from __future__ import annotations

import json
import math
from datetime import UTC, datetime, timedelta, timezone

import pytest

from runonce.core.store import Claim, StoredResult
from runonce.store import valkey as store_module

LEASE = timedelta(seconds=120)
RETENTION = timedelta(days=7)
KEY = "nightly-report-2026-11-29T03:00:00Z"
FIELDS = {"job": "nightly-report", "schedule_time": "2026-11-29T03:00:00Z", "forced": False}


def _reference(value: object) -> str:
    return json.dumps(value, default=store_module._instant, separators=(",", ":"), allow_nan=False)


@pytest.mark.parametrize(
    "value",
    [
        "plain",
        'quotes " and \\ backslash',
        "control \n\t\x00 and unicode é ☃ 𝄞",
        "",
        store_module._NOW,
        store_module._NOW + timedelta(minutes=10, microseconds=7),
        store_module._NOW - timedelta(days=3),
        datetime(2026, 12, 7, 7, 0, 0, 123456, tzinfo=UTC),
        datetime(1969, 12, 31, 23, 59, 59, 999999, tzinfo=UTC),
        datetime(2026, 12, 7, 9, 0, tzinfo=timezone(timedelta(hours=2))),
        True,
        False,
        None,
        0,
        -12345678901234567890,
        1.5,
        ["a", 1, None],
        {"at": store_module._NOW + timedelta(seconds=1), "in": {"at": datetime(2026, 1, 1, tzinfo=UTC)}},
    ],
)
def test_a_fields_stored_text_is_what_the_json_encoder_writes(value):
    assert store_module._encode(value) == _reference(value)


@pytest.mark.parametrize("value", [math.nan, math.inf, object(), {1, 2}])
def test_what_json_cannot_hold_is_refused_as_the_json_encoder_refuses_it(value):
    with pytest.raises((ValueError, TypeError)) as expected:
        _reference(value)
    with pytest.raises(expected.type):
        store_module._encode(value)


def test_the_job_index_outlives_the_record_through_its_claim_and_completion(valkey_store):
    store = valkey_store(LEASE, RETENTION)
    claim = store.claim(KEY, dict(FIELDS))
    assert isinstance(claim, Claim), claim
    client, record_key = store._client, store._key(KEY)
    indexes = [f"{store._prefix}:index", f'{store._prefix}:job:"{FIELDS["job"]}"']
    score = store._client.zscore(indexes[1], KEY)
    assert all(client.pttl(index) >= client.pttl(record_key) > 0 for index in indexes)
    client.pexpire(indexes[1], 60_000)  # shorter than the record: the completion must lengthen it
    assert store.complete(claim, StoredResult.of("ok")) is not None
    kept = RETENTION.total_seconds() * 900  # ms: most of the retention, not the minute set above
    assert all(client.pttl(index) >= client.pttl(record_key) > kept for index in indexes)
    assert [client.zscore(index, KEY) for index in indexes] == [score, score]
    assert list(store.find({"job": FIELDS["job"]})) == [KEY]


def test_an_index_with_no_expiry_keeps_none_after_a_write(valkey_store):
    store = valkey_store(LEASE, RETENTION)
    index = f"{store._prefix}:index"
    store._client.zadd(index, {"someone-else": 0})  # an index kept without an expiry
    claim = store.claim(KEY, dict(FIELDS))
    assert isinstance(claim, Claim), claim
    assert store.complete(claim, StoredResult.of("ok")) is not None
    assert store._client.pttl(index) == -1
