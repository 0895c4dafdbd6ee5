"""A run key as an operator types it: checked against Firestore's document-id rules before any
read, so a mistyped key is bad input (exit 2), not a client library's traceback."""

from __future__ import annotations

import re

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
