"""A run key as an operator types it: checked against Firestore's document-id rules (which the
Valkey store's keys meet too) before any read, so a mistyped key is bad input (exit 2), not a
client library's traceback; or a short prefix of one (as `runonce runs` shows them), resolved to
the one record id it starts."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable

from operate.team import BadInput

# Firestore's document ids: at most 1,500 bytes of UTF-8, no "/", not "." or "..", not __.*__
# (https://firebase.google.com/docs/firestore/quotas#collections_documents_and_fields).
MAX_KEY_BYTES = 1500
_RESERVED = re.compile(r"__.*__", re.DOTALL)


def checked_key(key: str, option: str = "KEY") -> str:
    """`key` if it can be a record's id; BadInput naming `option` and the fix otherwise."""
    problem = None
    try:
        size = len(key.encode("utf-8"))
    except UnicodeEncodeError:
        problem = "is not valid UTF-8"
    else:
        if not key.strip():
            problem = "is empty"
        elif size > MAX_KEY_BYTES:
            problem = f"is {size} bytes, more than a record id's {MAX_KEY_BYTES}"
        elif "/" in key or key in (".", "..") or _RESERVED.fullmatch(key):
            problem = "is not a record id (no '/', not '.' or '..', not __name__)"
    if problem:
        raise BadInput(option, f"{key[:80]!r} {problem}; `runonce runs --team T` lists the run keys")
    return key


SHORT_KEY = 12
"""The fewest characters of a run key `runonce runs` shows (48 bits of a SHA-256 digest)."""
MIN_PREFIX = 4
"""A shorter KEY is looked up as a whole key only."""
_CANDIDATES = 10


def short_keys(keys: Iterable[str]) -> dict[str, str]:
    """Each key's shortest prefix of at least SHORT_KEY characters that no other key of `keys`
    starts with (the whole key if it is a prefix of another)."""
    ordered = sorted(set(keys))
    shown = {}
    for index, key in enumerate(ordered):
        neighbours = ordered[max(0, index - 1) : index] + ordered[index + 1 : index + 2]
        common = max((_common(key, other) for other in neighbours), default=0)
        shown[key] = key[: max(SHORT_KEY, common + 1)]
    return shown


def _common(one: str, other: str) -> int:
    length = 0
    for mine, theirs in zip(one, other, strict=False):
        if mine != theirs:
            break
        length += 1
    return length


def resolve_key(lookup: Callable[[str, int], list[str]], given: str, option: str = "KEY") -> str:
    """The run key `given` names: itself if a record has that id or none starts with it, else
    the one record id that starts with it (as git takes a short hash); BadInput naming `option`
    and listing the candidates if several do. `lookup(start, most)` gives at most `most` record
    ids that start with `start`, in order, `start` itself first (`clients.key_lookup`)."""
    key = checked_key(given, option)
    if len(key) < MIN_PREFIX:
        return key
    found = lookup(key, _CANDIDATES + 1)
    if key in found or len(found) <= 1:
        return found[0] if found and key not in found else key
    listed = ", ".join(found[:_CANDIDATES]) + (", ..." if len(found) > _CANDIDATES else "")
    raise BadInput(
        option,
        f"{key!r} is the start of {len(found)}{'+' if len(found) > _CANDIDATES else ''} run keys: "
        f"{listed}; give more of the key",
    )
