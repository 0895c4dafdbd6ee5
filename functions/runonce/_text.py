"""Text that is safe to store, log and answer, whatever it came from.

Firestore and Cloud Logging take valid UTF-8 of bounded size; a job can raise an exception whose
message is megabytes long, holds lone surrogates, or whose `str()` itself raises. Everything
runonce writes about a job goes through here first.
"""

from __future__ import annotations

# Stored and answered error messages are cut to this many characters.
MAX_ERROR_CHARS = 4096


def clip(text: str, limit: int) -> str:
    """`text` as valid UTF-8 of at most `limit` characters (a marker says how much was cut).

    Clipping clipped text changes nothing, so what is stored and what is answered agree.
    """
    text = _cut(text, limit)
    if text.isascii():
        return text
    # Lone surrogates (from surrogateescape, or put there on purpose) are not UTF-8: spell them out.
    return _cut(text.encode("utf-8", "backslashreplace").decode("utf-8"), limit)


def _cut(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    keep = max(limit - len(f"… [{len(text)} more characters cut]"), 0)
    return f"{text[:keep]}… [{len(text) - keep} more characters cut]"


def type_name(value: object) -> str:
    """The name of `value`'s type, even when its class misbehaves."""
    try:
        name = type(value).__name__
    except Exception:
        return "object"
    return name if type(name) is str else "object"


def describe(exc: BaseException, limit: int = MAX_ERROR_CHARS) -> str:
    """The exception's message, clipped; its repr or just its type when `str()` raises."""
    for render in (str, repr):
        try:
            text = render(exc)
            if isinstance(text, str):
                # A str subclass may override anything: copy its characters into a plain str.
                return clip("".join([text]), limit)
        except Exception:
            continue
    return f"{type_name(exc)} (its message could not be read)"
