"""The Firestore ledger as a `Store`: the same calls, with Google's exceptions translated.

Everything Firestore-specific that the core used to know (which exception means "unavailable",
which "refused", which "your setup is wrong") is decided here, once.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

from google.api_core import exceptions as gexc

from .errors import StoreDenied, StoreRejected, StoreUnavailable
from .ledger import TRANSIENT, Claim, Held, Ledger
from .results import StoredResult
from .text import describe, type_name

# The store refused the function's identity, or the database does not exist.
_DENIED = (gexc.PermissionDenied, gexc.Unauthenticated, gexc.NotFound)


def _problem(exc: Exception) -> str:
    """What went wrong with a Firestore call, named for what it was."""
    if isinstance(exc, (gexc.RetryError, *TRANSIENT)):
        return f"the store was unavailable ({type_name(exc)}: {describe(exc, 500)})"
    return f"the store rejected it ({type_name(exc)}: {describe(exc, 500)})"


@contextlib.contextmanager
def _translated() -> Iterator[None]:
    try:
        yield
    except (gexc.RetryError, *TRANSIENT) as exc:
        raise StoreUnavailable(_problem(exc)) from exc
    except _DENIED as exc:
        raise StoreDenied(
            f"{_problem(exc)}; check that the Firestore database (RUNONCE_DATABASE) exists and that the "
            "function's service account may use it (roles/datastore.user)"
        ) from exc
    except gexc.GoogleAPICallError as exc:
        raise StoreRejected(_problem(exc)) from exc


class LedgerStore:
    """A `Store` backed by a Firestore `Ledger`."""

    def __init__(self, ledger: Ledger):
        self.ledger = ledger

    def claim(self, key: str, fields: dict[str, Any]) -> Claim | Held:
        """See `Store.claim`."""
        with _translated():
            return self.ledger.claim(key, fields)

    def exists(self, key: str) -> bool:
        """See `Store.exists`."""
        with _translated():
            return self.ledger.exists(key)

    def complete(self, claim: Claim, stored: StoredResult) -> StoredResult | None:
        """See `Store.complete`."""
        with _translated():
            return self.ledger.record_result(claim, stored)

    def fail(self, claim: Claim, error: str) -> bool:
        """See `Store.fail`."""
        with _translated():
            return self.ledger.fail(claim, error)

    def release(self, claim: Claim) -> bool:
        """See `Store.release`."""
        with _translated():
            return self.ledger.release(claim)

    def hold(self, claim: Claim, seconds: float, reason: str) -> bool:
        """See `Store.hold`."""
        with _translated():
            return self.ledger.hold(claim, seconds, reason)

    def read(self, key: str) -> dict[str, Any] | None:
        """See `Store.read`."""
        with _translated():
            return self.ledger.get(key)

    def annotate(self, key: str, fields: dict[str, Any]) -> None:
        """See `Store.annotate`."""
        with _translated():
            self.ledger.annotate(key, fields)
