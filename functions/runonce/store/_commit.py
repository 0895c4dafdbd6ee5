"""The ledger's two happy-path writes, sent as Firestore Commit requests built directly as protobufs.

The client library's `create()` and `update()` build each request through proto-plus and the
gapic wrapper, which costs about 0.3 ms of CPU per write here, a fifth of a write's latency on
the emulator. `Writes` builds the same Commit request (same write, same precondition, same update
mask, same request metadata) as a plain protobuf and sends it on the client's own gRPC channel,
with the caller's timeout and retry applied the way the gapic wrapper applies them (the first
try, which usually succeeds, sent without the wrappers, and any later one as they would send it),
and gRPC errors mapped to the same `google.api_core` exceptions.

This reads attributes the Firestore client does not make public (google-cloud-firestore 2.34.1,
pinned): `_firestore_api` (its gapic client, whose transport holds the channel),
`_database_string` and `_rpc_metadata`. They are looked up once, when the ledger is built; if any
is missing or of an unexpected type, every write goes through the public API instead, and that is
logged (once: a process builds its ledger once). A write whose fields the direct path does not
encode (anything but plain str, int, float, bool, None and datetime values under plain field
names) goes through the public API too, so the library alone decides what it accepts.
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any, NamedTuple

from google.api_core import datetime_helpers, gapic_v1, grpc_helpers
from google.api_core.retry import Retry
from google.api_core.timeout import TimeToDeadlineTimeout
from google.cloud import firestore

from .._logs import log
from ..core.errors import RunonceError

COMMIT_METHOD = "/google.firestore.v1.Firestore/Commit"
# Field names that are their own field path (no quoting, no nesting) in create and update alike.
_PLAIN_NAME = re.compile(r"[A-Za-z_][A-Za-z_0-9]*\Z")
_INT64 = range(-(2**63), 2**63)
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


class _Unsupported(RunonceError):
    """A write the direct path does not build: the public API sends it instead."""


class _Channel(NamedTuple):
    """What a direct Commit needs from one client: the call, the database and the metadata."""

    commit: Any
    database: str
    metadata: tuple[tuple[str, str], ...]
    request_type: Any
    precondition_type: Any
    result_type: Any
    timestamp_type: Any
    """The datetime type proto-plus reads a Timestamp as (its DatetimeWithNanoseconds)."""


class Write(NamedTuple):
    """One write of a commit: create `doc` with `data` (`last_update_time` None), update the fields
    of `data` only if `doc` was last written at `last_update_time`, or delete it (`data` None) then;
    or (`replace`) write `doc` whole as `data`, whatever it held, with no precondition."""

    doc: Any
    data: dict[str, Any] | None
    last_update_time: datetime | None = None
    replace: bool = False


class Writes:
    """Create a document, or update one guarded by its update time, or commit several such writes
    at once; each returns the new update time (one commit time for all its writes).

    Direct Commit requests when the client allows (see the module docstring), else the public API.
    """

    def __init__(self, client: firestore.Client):
        self._client = client
        self._channel = _direct_channel(client)

    @property
    def direct(self) -> bool:
        """Whether writes go to the client's gRPC channel directly (False: through its public API)."""
        return self._channel is not None

    def create(self, doc: Any, data: dict[str, Any], *, timeout: float, retry: Retry | None) -> datetime:
        """`doc.create(data)`: fails with AlreadyExists if the document exists."""
        return self.commit([Write(doc, data)], timeout=timeout, retry=retry)

    def update(
        self,
        doc: Any,
        data: dict[str, Any],
        last_update_time: datetime,
        *,
        timeout: float,
        retry: Retry | None,
    ) -> datetime:
        """`doc.update(data)` only if the document was last written at `last_update_time`.

        Fails with FailedPrecondition (or NotFound) when it was written since, or deleted.
        """
        return self.commit([Write(doc, data, last_update_time)], timeout=timeout, retry=retry)

    def commit(self, writes: list[Write], *, timeout: float, retry: Retry | None) -> datetime:
        """All of `writes` in one commit, atomically: when any precondition fails (AlreadyExists,
        FailedPrecondition, NotFound), none is written."""
        direct = self._direct_request(writes)
        if direct is None:
            return self._public(writes, timeout, retry)
        channel, request = direct
        return _update_time(channel, self._send(channel, request, timeout, retry))

    def apply(self, writes: list[Write], *, timeout: float, retry: Retry | None) -> None:
        """`commit`, for a caller that needs no update time: none is read from the answer."""
        direct = self._direct_request(writes)
        if direct is None:
            self._public(writes, timeout, retry)
        else:
            self._send(*direct, timeout, retry)

    def _public(self, writes: list[Write], timeout: float, retry: Retry | None) -> datetime:
        """`commit` through the client's public API: a write batch."""
        batch = self._client.batch()
        for write in writes:
            option = (
                None
                if write.last_update_time is None
                else self._client.write_option(last_update_time=write.last_update_time)
            )
            if write.replace:
                batch.set(write.doc, write.data or {})
            elif write.data is None:
                batch.delete(write.doc, option=option)
            elif option is None:
                batch.create(write.doc, write.data)
            else:
                batch.update(write.doc, write.data, option=option)
        return batch.commit(timeout=timeout, retry=retry)[0].update_time

    def _direct_request(self, writes: list[Write]) -> tuple[_Channel, Any] | None:
        """The channel and a Commit request of `writes` on it; None when they go through the public
        API (no usable channel, or a name or value the encoding here does not cover)."""
        channel = self._channel
        if channel is None:
            return None
        request = channel.request_type(database=channel.database)
        for write in writes:
            out = request.writes.add()
            name = f"{channel.database}/documents/{write.doc.path}"
            if write.data is None:
                out.delete = name
            else:
                out.update.name = name
                try:
                    for field, value in write.data.items():
                        if not (type(field) is str and _PLAIN_NAME.match(field)):
                            raise _Unsupported(field)
                        _encode(value, out.update.fields[field])
                except _Unsupported:
                    return None
            if write.replace:
                continue  # no mask: the document becomes `data`; no precondition
            if write.last_update_time is None:
                out.current_document.exists = False
            else:
                if write.data is not None:
                    out.update_mask.field_paths.extend(write.data)
                out.current_document.update_time.CopyFrom(_timestamp(channel, write.last_update_time))
        return channel, request

    @staticmethod
    def _send(channel: _Channel, request: Any, timeout: float, retry: Retry | None) -> Any:
        """The first WriteResult of the Commit `request`, sent as the gapic wrapper sends it."""

        def attempt(timeout: float | None = None) -> Any:
            return channel.commit(request, timeout=timeout, metadata=channel.metadata)

        started, wall = time.monotonic(), time.time()
        try:
            # The first try as the wrappers below would send it (the whole timeout), without them.
            response = attempt(timeout)
        except Exception as exc:
            if retry is None:
                raise
            response = _retried(attempt, exc, timeout, retry, started, wall)
        return response.write_results[0]


def _retried(
    attempt: Callable[..., Any], failed: Exception, timeout: float, retry: Retry, started: float, wall: float
) -> Any:
    """What the gapic wrapper's tries would answer after the first failed with `failed` (its try
    started at `started` by the monotonic clock and `wall` by the wall clock): each try gets the
    time left of `timeout`, and `retry` decides on `failed` and every later failure, with its
    deadline counted from the first try, as if it had wrapped that try too."""
    first = [failed]

    def again(timeout: float | None = None) -> Any:
        if first:
            raise first.pop()
        return attempt(timeout)

    readings = iter([datetime.fromtimestamp(wall, UTC)])  # the deadline wrapper's first reading

    def clock() -> datetime:
        return next(readings, None) or datetime_helpers.utcnow()

    tries = TimeToDeadlineTimeout(timeout=timeout, clock=clock)(again)
    left = None if retry.timeout is None else retry.timeout - (time.monotonic() - started)
    return retry.with_timeout(left)(tries)()


def _update_time(channel: _Channel, result: Any) -> datetime:
    """A WriteResult's update time as proto-plus reads it (its DatetimeWithNanoseconds, the type the
    library returns), without wrapping the whole result to read one field."""
    if not result.HasField("update_time"):
        return channel.result_type.wrap(result).update_time
    return channel.timestamp_type.from_timestamp_pb(result.update_time)


def _timestamp(channel: _Channel, value: datetime) -> Any:
    """`value` as the Timestamp proto-plus sends: an update time the store returned keeps its
    nanoseconds (`timestamp_pb`); any other datetime goes through proto-plus itself."""
    if type(value) is channel.timestamp_type:
        return value.timestamp_pb()  # type: ignore[attr-defined]
    return channel.precondition_type.pb(channel.precondition_type(update_time=value)).update_time


def _microseconds(value: datetime) -> int:
    """`datetime_helpers.to_microseconds(value)`, its float product included, computed from the
    difference to the epoch for a UTC datetime (what runonce's clock gives) instead of a time tuple."""
    if value.tzinfo is not UTC:
        return int(datetime_helpers.to_microseconds(value))
    delta = value - _EPOCH
    return int((delta.days * 86400 + delta.seconds) * 1e6) + delta.microseconds


def _encode(value: Any, out: Any) -> None:
    """Set `out` (a Value protobuf) as the library's encoder would, for the plain types it takes."""
    kind = type(value)
    if value is None:
        out.null_value = 0
    elif kind is bool:
        out.boolean_value = value
    elif kind is int and value in _INT64:
        out.integer_value = value
    elif kind is float:
        out.double_value = value
    elif kind is str:
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            raise _Unsupported("not UTF-8") from None
        out.string_value = value
    elif kind is datetime:
        # The library's conversion: naive means UTC, microsecond precision.
        seconds, micros = divmod(_microseconds(value), 10**6)
        out.timestamp_value.seconds = seconds
        out.timestamp_value.nanos = micros * 1000
    elif kind is datetime_helpers.DatetimeWithNanoseconds:  # an event's time; proto-plus keeps its nanos
        out.timestamp_value.CopyFrom(value.timestamp_pb())
    else:
        raise _Unsupported(kind.__name__)


def _direct_channel(client: Any) -> _Channel | None:
    """What a direct Commit needs from `client`, or None (logged once) if it does not have it."""
    try:
        from google.cloud.firestore_v1.services.firestore.transports.base import DEFAULT_CLIENT_INFO
        from google.cloud.firestore_v1.types import CommitRequest, CommitResponse, Precondition, WriteResult

        channel = client._firestore_api.transport.grpc_channel
        database = client._database_string
        metadata = tuple(client._rpc_metadata)
        if not (
            callable(getattr(channel, "unary_unary", None))
            and isinstance(database, str)
            and database.startswith("projects/")
            and all(
                isinstance(pair, tuple) and len(pair) == 2 and all(isinstance(part, str) for part in pair)
                for pair in metadata
            )
        ):
            raise TypeError("the client's channel, database or metadata is not what this path expects")
        request_type, response_type = CommitRequest.pb(), CommitResponse.pb()
        timestamp_type = type(WriteResult.wrap(WriteResult.pb()(update_time={"seconds": 0})).update_time)
        if not all(
            callable(getattr(timestamp_type, name, None)) for name in ("from_timestamp_pb", "timestamp_pb")
        ):
            raise TypeError(
                f"proto-plus reads a Timestamp as {timestamp_type.__name__}, not its DatetimeWithNanoseconds"
            )
        # Errors mapped to google.api_core exceptions, as the gapic transport maps them.
        commit = grpc_helpers.wrap_errors(
            channel.unary_unary(
                COMMIT_METHOD,
                request_serializer=request_type.SerializeToString,
                response_deserializer=response_type.FromString,
            )
        )
        # The metadata the gapic client sends with a Commit: its client info, the client's
        # resource prefix (and the emulator's token), and the routing header.
        sent = (
            DEFAULT_CLIENT_INFO.to_grpc_metadata(),
            *metadata,
            gapic_v1.routing_header.to_grpc_metadata((("database", database),)),
        )
        return _Channel(commit, database, sent, request_type, Precondition, WriteResult, timestamp_type)
    except Exception as exc:  # whatever a different client version does differently
        # Logged once per ledger, and a process builds its ledger once.
        log(
            logging.INFO,
            "the ledger writes through the Firestore client's public API: its internals are not "
            f"the ones the direct Commit path expects ({type(exc).__name__}: {exc})",
        )
        return None
