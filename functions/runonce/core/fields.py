"""A request's fields as runonce reads them: bounded text, and an error that names the field.

A Scheduler delivery's headers and a push envelope's fields are read alike, so a bad one is
rejected (400, before any write) with a message that starts with the field to fix.
"""

from __future__ import annotations

from typing import ClassVar

from .errors import RunonceError


class BadField(RunonceError, ValueError):
    """A field of a request is missing or wrong; the message starts with the field's name."""

    MISSING: ClassVar[str]
    """The problem a missing required field is reported with: what the request was meant to be."""

    def __init__(self, field: str, problem: str):
        super().__init__(f"{field}: {problem}")
        self.field = field


def read_text(value: object, field: str, limit: int, error: type[BadField], required: bool = True) -> str:
    """`value` as text of at most `limit` characters, "" if absent and not required; else `error`."""
    if value is None or value == "":
        if required:
            raise error(field, error.MISSING)
        return ""
    if not isinstance(value, str):
        raise error(field, f"is a {type(value).__name__}, not a string")
    if len(value) > limit:
        raise error(field, f"{len(value)} characters, more than the {limit} allowed")
    return value
