"""The run store on Valkey or Redis 7 (Memorystore for Valkey): the core's `Store`, each operation
one call of a server-side function (`valkey.lua` beside this file, loaded with FUNCTION LOAD).

Claim, claim with the job lock, take lock, complete, fail, release, hold, note and annotate are
each decided and written by one function on the server, under the server's clock (`TIME`): no
decision is taken in this process between a read and a write. Every write of a record moves its
fencing token (`Claim.update_time` here is that token as an instant), strictly increasing, and a
finishing write lands only if the record still has the claim's attempt and token. A record's key
expires at its `expire_at`. Listing (`find`) reads an index the functions keep (one sorted set
per job and one of every record, scored by claim time), pruned of expired records as it is read.

The operators' and re-run verbs (amend, release_held, request_rerun, withdraw_rerun, take_rerun)
decide with the shared record code (`_records`, `_requests`) as an optimistic transaction: one
call reads the records with their tokens and the server's clock, and one call writes only if no
token moved since (else it reads again), recognising its own write when an answer was lost.

What a record holds is `_records`' business, as for every store: this module builds the fields
with `now` standing for the server's clock (`_NOW`), and the function adds the clock to them.
With `replicas`, each claim and completion sends WAIT in the same round trip: a claim the replicas
did not acknowledge is released and raised as StoreUnavailable, so nothing runs on a record that
a failover could lose (docs/library.md, "The Valkey store").

Import this module only when the Valkey store is chosen: it loads the `valkey` client (the extra).
"""

from __future__ import annotations

import contextlib
import copy
import hashlib
import json
import logging
import re
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from datetime import UTC, datetime, timedelta
from json.encoder import encode_basestring_ascii
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import valkey

from .._logs import log
from .._text import MAX_ERROR_CHARS, clip, describe, type_name
from ..contract import EXPIRE_AT_FIELD, Overlap, RunStatus
from ..core.errors import ConfigError, StoreDenied, StoreRejected, StoreUnavailable
from ..core.store import (
    Claim,
    Decision,
    Done,
    Held,
    JobLock,
    Overlapped,
    Previous,
    Refusal,
    Rerun,
    StoredResult,
    done_entry,
    done_id,
    previous_of,
)
from . import _records
from ._records import finish_fields, held, hold_fields, lease_fields, lock_record, release_decision

if TYPE_CHECKING:
    from ..core.requests import RerunRequest

_T = TypeVar("_T")

_TEMPLATE = (Path(__file__).with_name("valkey.lua")).read_text()
LIBRARY_VERSION = hashlib.sha256(_TEMPLATE.encode()).hexdigest()[:12]
"""The function library's digest: its name and every function's carry it, so two versions of
runonce can serve side by side while a deploy rolls out."""
LIBRARY = _TEMPLATE.replace("__V__", LIBRARY_VERSION)
"""The function library's text, as FUNCTION LOAD takes it."""

EVICTION_SETTING = "maxmemory-policy"
"""The server setting that must be `noeviction`: any other policy may delete a run's record."""
LOST_ANSWER_TRIES = 3
"""Calls of one function with the same arguments when the connection fails: every function
recognises its own earlier write, so a call whose answer was lost is answered as it landed."""
CONTENDED_TRIES = 8
"""Optimistic transactions tried when each finds a record changed since it read it."""

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_MICROSECOND = timedelta(microseconds=1)


class _Now(datetime):
    """`now` in the fields a function writes: every instant computed from it (datetime keeps the
    subclass through arithmetic) is sent as an offset, and the function adds its clock."""


_NOW = _Now(2000, 1, 1, tzinfo=UTC)


def _microseconds(instant: datetime) -> int:
    return (instant - _EPOCH) // _MICROSECOND


def _instant(value: Any) -> dict[str, int]:
    if isinstance(value, _Now):
        return {"$rel": (value - _NOW) // _MICROSECOND}
    if isinstance(value, datetime):
        return {"$dt": _microseconds(value)}
    raise TypeError(f"a record field holds {type_name(value)}, which the Valkey store cannot keep")


_ENCODER = json.JSONEncoder(default=_instant, separators=(",", ":"), allow_nan=False)


_SECTION = json.JSONEncoder(separators=(",", ":"))


def _encode(value: Any) -> str:
    """A field's value as stored: JSON text, an instant as {"$dt": microseconds since 1970}.
    Texts and instants, most of what a claim and a completion send, skip the encoder's set-up."""
    if isinstance(value, str):
        return encode_basestring_ascii(value)
    if isinstance(value, datetime):
        ((tag, number),) = _instant(value).items()
        return f'{{"{tag}":{number}}}'
    return _ENCODER.encode(value)


def _decoded_instant(value: dict[str, Any]) -> Any:
    if len(value) == 1 and isinstance(value.get("$dt"), int):
        return _EPOCH + value["$dt"] * _MICROSECOND
    return value


def _decode(text: str) -> Any:
    return json.loads(text, object_hook=_decoded_instant)


def _record(flat: Sequence[str]) -> dict[str, Any] | None:
    """A record from a hash's fields and values (None for no fields); `.fence`, `.txn` left out."""
    if not flat:
        return None
    pairs = zip(flat[::2], flat[1::2], strict=True)
    return {name: _decode(value) for name, value in pairs if not name.startswith(".")}


def _section(fields: Mapping[str, Any]) -> list[str]:
    """`fields` as a function reads them: one argument, a JSON object of each name and stored
    value (the client packs, and the function decodes, one argument instead of two per field)."""
    return [_SECTION.encode({name: _encode(value) for name, value in fields.items()})]


def _fence(token: Any) -> datetime:
    return _EPOCH + int(token) * _MICROSECOND


def _token(claim: Claim) -> str:
    return str(_microseconds(claim.update_time))


def _problem(exc: Exception) -> str:
    if isinstance(exc, (valkey.ConnectionError, valkey.TimeoutError)):
        return f"the store was unavailable ({type_name(exc)}: {describe(exc, 500)})"
    return f"the store rejected it ({type_name(exc)}: {describe(exc, 500)})"


@contextlib.contextmanager
def _translated() -> Iterator[None]:
    try:
        yield
    except (valkey.AuthenticationError, valkey.exceptions.NoPermissionError) as exc:
        raise StoreDenied(
            f"{_problem(exc)}; check the server's address, its AUTH password or IAM token, and that "
            "this identity may run FUNCTION LOAD, FCALL and the commands they call"
        ) from exc
    except (valkey.ConnectionError, valkey.TimeoutError) as exc:
        raise StoreUnavailable(_problem(exc)) from exc
    except valkey.ValkeyError as exc:
        raise StoreRejected(_problem(exc)) from exc


SCHEMES = ("valkey", "valkeys")
"""A store URL's schemes: `valkey://` over TCP, `valkeys://` over TLS."""
STORE_OPTIONS = ("replicas", "replica_wait_ms", "auth")
"""The store's own options in a URL's query; every other one goes to the client."""
SOCKET_SECONDS = 5.0
"""How long a call waits to connect, and for an answer, unless the URL says otherwise."""


def connect(
    url: str,
    prefix: str,
    lease: timedelta,
    retention: timedelta,
    tokens: Callable[[], tuple[str, datetime]] | None = None,
    ca: str | None = None,
) -> ValkeyStore:
    """The store `url` names, its records under `prefix`:
    `valkey://[USER:PASSWORD@]HOST:PORT[/DB][?replicas=N&replica_wait_ms=M]`, or `valkeys://` for
    TLS (the server's CA, as Memorystore's in-transit encryption gives it: `ssl_ca_certs=PATH`, or
    `ca`, its certificates as PEM text, RUNONCE_STORE_CA).
    `auth=iam` authenticates each connection with an IAM access token (`runonce.store._iam`;
    `tokens` replaces the runtime account's, for tests). Other query options are the client's
    (`socket_timeout=2`). ConfigError naming the URL (its password hidden), the part that is wrong
    and the fix."""
    parts = urlsplit(url)
    shown = urlunsplit(parts._replace(netloc=parts.netloc.replace(f":{parts.password}@", ":***@")))
    if parts.scheme not in SCHEMES:
        raise ConfigError(
            f"the store URL {shown!r} is not valkey://HOST:PORT or valkeys://HOST:PORT (TLS); give the "
            "server's address in one of those forms"
        )
    query = parse_qsl(parts.query, keep_blank_values=True)
    options = dict(pair for pair in query if pair[0] in STORE_OPTIONS)
    replicas = _count(shown, "replicas", options.get("replicas", "0"), 0)
    wait_ms = _count(shown, "replica_wait_ms", options.get("replica_wait_ms", "1000"), 1)
    rest = urlencode([pair for pair in query if pair[0] not in STORE_OPTIONS])
    client_options: dict[str, Any] = {}
    if ca is not None:
        if parts.scheme != "valkeys":
            raise ConfigError(
                f"a CA is given for the store URL {shown!r} (RUNONCE_STORE_CA), which is not TLS: use "
                "valkeys://, or give no CA"
            )
        client_options["ssl_ca_data"] = ca
    if "auth" in options:
        from ._iam import iam_password

        parts, client_options["credential_provider"] = iam_password(shown, parts, options["auth"], tokens)
    try:
        if not parts.hostname:
            raise ValueError("it names no host")
        client = valkey.Valkey.from_url(
            urlunsplit(parts._replace(query=rest)),
            **client_options,
            decode_responses=True,
            socket_timeout=SOCKET_SECONDS,  # the URL's own socket_timeout wins
            socket_connect_timeout=SOCKET_SECONDS,
        )
    except ValueError as exc:
        raise ConfigError(f"the store URL {shown!r} cannot be used: {describe(exc, 200)}") from None
    replica_wait = timedelta(milliseconds=wait_ms)
    return ValkeyStore(client, prefix, lease, retention, replicas=replicas, replica_wait=replica_wait)


def _count(shown: str, name: str, value: str, least: int) -> int:
    if not (value.isascii() and value.isdigit()) or int(value) < least:
        raise ConfigError(
            f"the store URL {shown!r} has {name}={value!r}: give a whole number, {least} or more"
        )
    return int(value)


def check_eviction(client: valkey.Valkey) -> str | None:
    """StoreDenied if the server may evict records (its `maxmemory-policy` is not `noeviction`);
    the policy read, or None where the server does not let a client read its configuration."""
    with _translated():
        try:
            answer = client.execute_command("CONFIG GET", EVICTION_SETTING)
        except valkey.ResponseError as exc:
            log(
                logging.WARNING,
                f"runonce cannot read the Valkey server's {EVICTION_SETTING} ({describe(exc, 200)}): make "
                "sure it is noeviction, or a full server deletes runs' records",
            )
            return None
    policy = dict(answer).get(EVICTION_SETTING)  # the client answers CONFIG GET as a dict
    if policy != "noeviction":
        raise StoreDenied(
            f"the Valkey server's {EVICTION_SETTING} is {policy!r}: it may delete runs' records to free "
            f"memory (every record has an expiry), so runonce will not use it; set {EVICTION_SETTING} "
            "to noeviction (Memorystore: the instance's engine configuration)"
        )
    return policy


def _check_wait(client: valkey.Valkey, replicas: int) -> None:
    """StoreDenied if the server refuses WAIT, which `replicas` needs."""
    try:
        with _translated():
            client.execute_command("WAIT", 0, 0)
    except StoreRejected as exc:
        raise StoreDenied(
            f"{exc.problem}: the store is set to wait for {replicas} replicas and the server refuses "
            "WAIT; set replicas=0 (a failover may then lose acknowledged claims)"
        ) from exc


class ValkeyStore:
    """Runs claimed under `lease` and kept `retention` after each write, in the records under
    `prefix` of the server `client` talks to (a `valkey.Valkey` with decode_responses=True).

    Makes no call until its first operation, which first refuses a server whose eviction policy
    may delete records (`check_eviction`) or that refuses WAIT when `replicas` needs it, as
    StoreDenied (the handler answers `misconfigured`), every call until the server passes. `replicas`: the
    replicas a claim and a completion wait for (WAIT, in the same round trip); a claim fewer
    acknowledged within `replica_wait` is released and raised as StoreUnavailable (nothing ran),
    a completion is kept and logged (the body ran; a retry could not undo it). `clock` is for
    tests only: it replaces the server's clock in every decision (instants the test controls);
    the fencing tokens still follow the server's.
    """

    def __init__(
        self,
        client: valkey.Valkey,
        prefix: str,
        lease: timedelta,
        retention: timedelta,
        clock: Callable[[], datetime] | None = None,
        replicas: int = 0,
        replica_wait: timedelta = timedelta(seconds=1),
    ):
        if isinstance(replicas, bool) or not isinstance(replicas, int) or replicas < 0:
            raise ConfigError(f"replicas is {replicas!r}: give the replicas a claim waits for, 0 or more")
        self._client = client
        self._prefix = prefix
        self._lease = lease
        self._retention = retention
        self._clock = clock
        self._replicas = replicas
        self._replica_wait_ms = max(1, round(replica_wait.total_seconds() * 1000))
        self._checked = False

    def claim(self, key: str, fields: dict[str, Any]) -> Claim | Held:
        """See `Store.claim`."""
        claimed = self._claim(key, fields, None)
        assert not isinstance(claimed, Overlapped)  # only a lock is ever overlapped
        return claimed

    def claim_locked(self, key: str, fields: dict[str, Any], lock: JobLock) -> Claim | Held | Overlapped:
        """See `Store.claim_locked`."""
        return self._claim(key, fields, lock)

    def _claim(self, key: str, fields: dict[str, Any], lock: JobLock | None) -> Claim | Held | Overlapped:
        attempt_id = uuid.uuid4().hex
        lease = lease_fields(attempt_id, _NOW, self._lease, self._retention)
        skips = lock is not None and lock.policy is Overlap.SKIP
        templates = [
            fields,
            lease,
            lock_record(key, lease, _NOW) if lock is not None else {},
            _records.skipped_record({}, "", _NOW, self._retention) if skips else {},
            _records.skipped_fields("", _NOW, self._retention) if skips else {},
        ]
        keys = [self._key(key)] + ([self._key(lock.id)] if lock is not None else [])
        policy = lock.policy.value if lock is not None else ""
        args = [_encode(key), _encode(attempt_id), policy]
        for template in templates:
            args += _section(template)
        answer, acknowledged = self._call_replicated("claim", keys, args)
        if answer[0] == "claim":
            locked = lock.id if lock is not None and int(answer[4]) else None
            claim = Claim(key, attempt_id, int(answer[2]), _fence(answer[1]), bool(int(answer[3])), locked)
            if acknowledged < self._replicas:
                self.release(claim)
                raise StoreUnavailable(
                    f"the claim of run {key} was acknowledged by {acknowledged} of the {self._replicas} "
                    f"replicas it waits for within {self._replica_wait_ms} ms (a failover could lose it): "
                    "released, nothing ran; a retry may claim it"
                )
            return claim
        if answer[0] == "overlap":
            assert lock is not None
            return self._overlapped(key, lock, answer)
        record = _record(answer[1:])
        assert record is not None
        return held(key, RunStatus(record["status"]), record)

    def take_lock(self, claim: Claim, lock: JobLock) -> Claim | Held | Overlapped:
        """See `Store.take_lock`."""
        unset = {"attempt_id": "", "lease_expires": _NOW, EXPIRE_AT_FIELD: _NOW}  # the run's, on the server
        templates = [
            _records.lock_taken_fields(_NOW),
            lock_record(claim.key, unset, _NOW),
            _records.skipped_fields("", _NOW, self._retention),
            _records.released_fields(_NOW),
        ]
        # The call's id, written with its write: sent again after a lost answer, it finds its own.
        call = uuid.uuid4().hex
        head = [_encode(claim.key), _encode(claim.attempt_id), _token(claim), lock.policy.value, call]
        sections = [item for t in templates for item in _section(t)]
        keys = [self._key(claim.key), self._key(lock.id)]
        answer = self._call("take_lock", keys, [*head, *sections])
        if answer[0] == "claim":
            return claim._replace(update_time=_fence(answer[1]), lock=lock.id)
        if answer[0] == "overlap":
            return self._overlapped(claim.key, lock, answer)
        return Held(claim.key, RunStatus.IN_PROGRESS)

    def exists(self, key: str) -> bool:
        """See `Store.exists`."""
        with _translated():
            return bool(self._client.exists(self._key(key)))

    def keys_starting(self, start: str, most: int) -> list[str]:
        """At most `most` of the run keys that start with `start`, in order, `start` itself first:
        for operators' short keys, read with ZSCAN from the index of every record (it walks the
        whole index: never on a request path)."""
        pattern = re.sub(r"([*?\[\]\\])", r"\\\1", start) + "*"
        with _translated():
            found = {name for name, _ in self._client.zscan_iter(f"{self._prefix}:index", match=pattern)}
        return sorted(found, key=lambda name: (name != start, name))[:most]

    def complete(self, claim: Claim, stored: StoredResult, done: Done | None = None) -> StoredResult | None:
        """See `Store.complete`: waits for the replicas as a claim does (logged if they lag)."""
        entry: list[str] = []
        if done is not None:
            fields = done_entry(done, claim.key, stored, _NOW + self._retention)
            entry = [done.completions, done_id(done.completions, done.order), *_section(fields)]
        written = self._finish(claim, RunStatus.COMPLETED, stored.fields(), entry)
        return stored if written else None

    def previous(self, index: str, before: int) -> Previous | None:
        """See `Store.previous`: one function call."""
        args = [done_id(index, before), done_id(index, 0)]
        with _translated():
            flat = self._call("previous", [f"{self._prefix}:done:{index}"], args)
        return previous_of(_record(flat))

    def fail(self, claim: Claim, error: str) -> bool:
        """See `Store.fail`: waits for the replicas as a claim does (logged if they lag)."""
        return self._finish(claim, RunStatus.FAILED, {"error": clip(error, MAX_ERROR_CHARS)})

    def release(self, claim: Claim) -> bool:
        """See `Store.release`. A record already gone counts as released."""
        if claim.reopened:
            return self._guarded(claim, _records.released_fields(_NOW), RunStatus.IN_PROGRESS, "free")[0]
        args = [_encode(claim.attempt_id), _token(claim)]
        return bool(self._call("release", self._claim_keys(claim), args))

    def hold(self, claim: Claim, seconds: float, reason: str) -> bool:
        """See `Store.hold`: the job lock the claim holds is held as long."""
        return self._guarded(claim, hold_fields(_NOW, seconds, reason), RunStatus.IN_PROGRESS, "keep")[0]

    def read(self, key: str) -> dict[str, Any] | None:
        """See `Store.read`."""
        with _translated():
            return _record(self._flat(self._client.execute_command("HGETALL", self._key(key))))

    def annotate(self, key: str, fields: dict[str, Any]) -> None:
        """See `Store.annotate`; StoreRejected if the run has no record."""
        if not self._call("annotate", [self._key(key)], _section(fields)):
            raise StoreRejected(f"the store rejected it: no record of run {key!r} to annotate")

    def note(self, key: str, fields: dict[str, Any]) -> None:
        """See `Store.note`."""
        self._call("note", [self._key(key)], _section({**fields, EXPIRE_AT_FIELD: _NOW + self._retention}))

    def read_many(self, keys: Sequence[str]) -> dict[str, dict[str, Any]]:
        """See `Store.read_many`: one round trip."""
        with _translated():
            pipeline = self._client.pipeline(transaction=False)
            for key in keys:
                pipeline.hgetall(self._key(key))
            answers = pipeline.execute()
        found = {key: _record(self._flat(answer)) for key, answer in zip(keys, answers, strict=True)}
        return {key: record for key, record in found.items() if record is not None}

    def find(
        self, equal: Mapping[str, Any], claimed_since: datetime | None = None
    ) -> dict[str, dict[str, Any]]:
        """See `Store.find`: the index of the job `equal` names (else of every record), read from
        `claimed_since`, then filtered by the other fields."""
        index = f"{self._prefix}:job:{_encode(equal['job'])}" if "job" in equal else f"{self._prefix}:index"
        since = "-inf" if claimed_since is None else str(_microseconds(claimed_since))
        answer = self._call("find", [index], [since])
        found: dict[str, dict[str, Any]] = {}
        at = 0
        while at < len(answer):
            name, count = answer[at], int(answer[at + 1])
            record = _record(answer[at + 2 : at + 2 + count])
            at += 2 + count
            if record is not None and all(n in record and record[n] == v for n, v in equal.items()):
                found[name] = record
        return found

    def amend(self, key: str, decide: Decision) -> dict[str, Any] | Refusal:
        """See `Store.amend`: an optimistic transaction."""
        return self._amend(key, lambda now: decide)

    def release_held(
        self, key: str, attempt_id: str, action: Mapping[str, Any], force: bool = False
    ) -> dict[str, Any] | Refusal:
        """See `Store.release_held`: decided on the server's clock as read with the record."""
        return self._amend(key, lambda now: release_decision(attempt_id, action, force, now))

    def _amend(self, key: str, decision: Callable[[datetime], Decision]) -> dict[str, Any] | Refusal:
        """The record of `key` changed as the decision made at the transaction's `now` says."""

        def step(tx: _Transaction) -> Callable[[datetime | None], dict[str, Any] | Refusal]:
            (record,) = tx.read(key)
            decided = decision(tx.now)(copy.deepcopy(record))
            if isinstance(decided, Refusal):
                return lambda _: decided
            written = {**(record or {}), **decided}
            tx.write(key, decided)
            return lambda _: copy.deepcopy(written)

        return self._transact(step)

    # The re-run verbs (docs/rerun.md): each one optimistic transaction.

    def request_rerun(
        self, slot: str, key: str, fields: dict[str, Any], insist: bool, ttl: timedelta
    ) -> RerunRequest:
        """See `Store.request_rerun`."""
        from . import _requests

        def step(tx: _Transaction) -> Callable[[datetime | None], RerunRequest]:
            record, request = tx.read(key, slot)
            _requests.refuse(key, record, request, insist, tx.now, fields)
            written = _requests.request_record(uuid.uuid4().hex, key, fields, tx.now, ttl, self._retention)
            tx.write(slot, written, replace=True)
            return lambda _: _requests.request_of(slot, written)

        return self._transact(step)

    def withdraw_rerun(self, slot: str, request_id: str) -> bool:
        """See `Store.withdraw_rerun`."""
        from . import _requests

        def step(tx: _Transaction) -> Callable[[datetime | None], bool]:
            (request,) = tx.read(slot)
            if request is None or not _requests.withdrawable(request, request_id):
                return lambda _: False
            tx.write(slot, _requests.withdrawn_fields(tx.now))
            return lambda _: True

        return self._transact(step)

    def take_rerun(self, slot: str, key: str, fields: dict[str, Any]) -> Rerun | None:
        """See `Store.take_rerun`."""

        def step(tx: _Transaction) -> Callable[[datetime | None], Rerun | None]:
            now = tx.now
            delivered, request = tx.read(key, slot)
            told = _records.told_rerun(delivered) if delivered is not None else None
            if not _records.may_consume(delivered, request, now):
                return lambda _: told
            assert request is not None
            if told is not None and not _records.finished(tx.read(told.key)[0]):
                return lambda _: told  # the run it carried may still need this very delivery (a retry)
            (target,) = tx.read(request["rerun_key"])
            if not _records.takeable(target, request, now):
                tx.write(slot, _records.void_fields(now, key))
                return lambda _: told
            lease = lease_fields(uuid.uuid4().hex, now, self._lease, self._retention)
            reopened = _records.taken_record(target, request, lease, fields, key, now)
            tx.write(request["rerun_key"], reopened, replace=True)
            marker = _records.marker_record(fields, request, now, self._retention, delivered)
            tx.write(key, marker, replace=True)
            tx.write(slot, _records.consumed_fields(now, key))

            def claimed(written_at: datetime | None) -> Rerun:
                assert written_at is not None
                return _records.rerun_claim(request, reopened, written_at)

            return claimed

        return self._transact(step)

    # One operation, one function call.

    def _finish(
        self, claim: Claim, status: RunStatus, fields: dict[str, Any], entry: Sequence[str] = ()
    ) -> bool:
        update = finish_fields(status, fields, _NOW, self._retention)
        done, acknowledged = self._guarded(claim, update, status, "free", replicated=True, entry=entry)
        if done and acknowledged < self._replicas:
            log(
                logging.WARNING,
                f"run {claim.key} is recorded {status.value}, acknowledged by {acknowledged} of the "
                f"{self._replicas} replicas waited for within {self._replica_wait_ms} ms: a failover "
                "before they copy it loses the record, and a later delivery runs the run again",
            )
        return done

    def _guarded(
        self,
        claim: Claim,
        update: dict[str, Any],
        status: RunStatus,
        lock_mode: str,
        replicated: bool = False,
        entry: Sequence[str] = (),
    ) -> tuple[bool, int]:
        """Write `update` if `claim` still holds the run, freeing the job lock it holds with it
        (`lock_mode` free) or holding it as long as the new lease (keep); else whether the record
        is already this attempt's with `status` (a write of its own landed, its answer lost). With
        the replicas that acknowledged it, when `replicated` (else as many as are waited for)."""
        args = [
            _encode(claim.attempt_id),
            _token(claim),
            _encode(status.value),
            lock_mode,
            *_section(update),
            *entry,
        ]
        keys = self._claim_keys(claim)
        if replicated:
            answer, acknowledged = self._call_replicated("finish", keys, args)
            return bool(answer), acknowledged
        return bool(self._call("finish", keys, args)), self._replicas

    def _overlapped(self, key: str, lock: JobLock, answer: Sequence[str]) -> Overlapped:
        lease_expires = _decode(answer[2]) if answer[2] else None
        return _records.overlapped(key, lock, _decode(answer[1]), {"lease_expires": lease_expires})

    def _claim_keys(self, claim: Claim) -> list[str]:
        return [self._key(claim.key)] + ([self._key(claim.lock)] if claim.lock is not None else [])

    def _key(self, key: str) -> str:
        return f"{self._prefix}:run:{key}"

    @staticmethod
    def _flat(mapping: Mapping[str, str]) -> list[str]:
        return [item for pair in mapping.items() for item in pair]

    def _now(self) -> str:
        """The `now` a function decides on: '' for the server's clock, else the test's clock's."""
        return "" if self._clock is None else str(_microseconds(self._clock()))

    def _call(self, function: str, keys: list[str], args: list[str]) -> Any:
        """FCALL `function` (see `_sent`)."""
        name = f"runonce_{LIBRARY_VERSION}_{function}"
        return self._sent(lambda resent: self._fcall(name, keys, args))

    def _call_replicated(self, function: str, keys: list[str], args: list[str]) -> tuple[Any, int]:
        """FCALL `function` and, in the same round trip, WAIT for the replicas (if any): its
        answer, and how many replicas acknowledged the write."""
        if not self._replicas:
            return self._call(function, keys, args), 0
        name = f"runonce_{LIBRARY_VERSION}_{function}"

        def send(resent: bool) -> tuple[Any, int]:
            pipeline = self._client.pipeline(transaction=False)
            pipeline.execute_command("FCALL", name, len(keys), *keys, self._prefix, self._now(), *args)
            pipeline.execute_command("WAIT", self._replicas, self._replica_wait_ms)
            answer, acknowledged = pipeline.execute()
            return answer, int(acknowledged)

        return self._sent(send)

    def _sent(self, send: Callable[[bool], _T]) -> _T:
        """`send(resent)`, after loading the library when the server does not have it (a new server, a
        failover to a replica without it, FUNCTION FLUSH), again when the answer is lost. The
        first call checks the server first (eviction, WAIT), until a check passes."""
        if not self._checked:
            check_eviction(self._client)
            if self._replicas:
                _check_wait(self._client, self._replicas)
            self._checked = True
        with _translated():
            for attempt in range(1, LOST_ANSWER_TRIES + 1):
                try:
                    return send(attempt > 1)
                except valkey.ResponseError as exc:
                    if "function not found" not in str(exc).lower():
                        raise
                    self._client.function_load(LIBRARY, replace=True)
                    return send(attempt > 1)
                except valkey.AuthenticationError:
                    raise
                except (valkey.ConnectionError, valkey.TimeoutError):
                    if attempt == LOST_ANSWER_TRIES:
                        raise
        raise AssertionError("a call returns or raises")

    def _fcall(self, name: str, keys: list[str], args: list[str]) -> Any:
        return self._client.execute_command("FCALL", name, len(keys), *keys, self._prefix, self._now(), *args)

    def _transact(self, step: Callable[[_Transaction], Callable[[datetime | None], _T]]) -> _T:
        """`step` run in fresh optimistic transactions until one commits: it reads through the
        transaction, stages its writes and returns what to answer given the write's fence."""
        for _ in range(CONTENDED_TRIES):
            tx = _Transaction(self)
            answer = step(tx)
            if not tx.writes:
                return answer(None)
            written_at = tx.commit()
            if written_at is not None:
                return answer(written_at)
        raise StoreUnavailable(f"the transaction kept losing to others ({CONTENDED_TRIES} tries)")


class _Transaction:
    """One optimistic transaction: records read with their tokens and the server's clock, and
    writes committed in one call that lands only if no record read has changed since."""

    def __init__(self, store: ValkeyStore):
        self._store = store
        self._seen: dict[str, str] = {}
        self._records: dict[str, dict[str, Any] | None] = {}
        self._now: datetime | None = None
        self.writes: dict[str, tuple[str, Mapping[str, Any]]] = {}
        self._id = uuid.uuid4().hex

    @property
    def now(self) -> datetime:
        """The server's clock when the transaction first read (the test's clock where it has one)."""
        if self._now is None:
            self.read()
        assert self._now is not None
        return self._now

    def read(self, *keys: str) -> list[dict[str, Any] | None]:
        """The records of `keys` (None: none), copies; those not read yet in one call."""
        new = [key for key in dict.fromkeys(keys) if key not in self._records]
        if new or self._now is None:
            answer = self._store._call("snapshot", [self._store._key(key) for key in new], [])
            self._now = self._now or _EPOCH + int(answer[0]) * _MICROSECOND
            at = 1
            for key in new:
                count = int(answer[at])
                flat = answer[at + 1 : at + 1 + count]
                at += 1 + count
                self._seen[key] = dict(zip(flat[::2], flat[1::2], strict=True)).get(".fence", "")
                self._records[key] = _record(flat)
        return [copy.deepcopy(self._records[key]) for key in keys]

    def write(self, key: str, fields: Mapping[str, Any], replace: bool = False) -> None:
        """Stage `fields` for `key`: the whole record (`replace`), or added to it."""
        self.writes[key] = ("replace" if replace else "merge", fields)

    def commit(self) -> datetime | None:
        """Write what is staged; its fence, or None if a record read has changed since."""
        keys = list(dict.fromkeys([*self._seen, *self.writes]))
        args = [self._id]
        for key in keys:
            action, fields = self.writes.get(key, ("", {}))
            args += [self._seen.get(key, "*"), action, *_section(fields)]
        answer = self._store._call("commit", [self._store._key(key) for key in keys], args)
        return _fence(answer[1]) if answer[0] == "done" else None
