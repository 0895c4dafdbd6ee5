"""The run store as the core sees it: claim, complete, fail, release, read.

The core (`handler`) talks only to this interface, so it knows no database and no client
library: the Firestore ledger (`ledger_store.LedgerStore`) is the first implementation, and a
second store is one more module. A `Claim` carries the store's fencing token, which only the store
reads. Store failures arrive as runonce's own `StoreUnavailable`, `StoreRejected` and
`StoreDenied` (see `errors`), never as a client library's exceptions.
"""

from __future__ import annotations

from typing import Any, Protocol

from .ledger import Claim, Held
from .results import StoredResult


class Store(Protocol):
    """Where runs are claimed under a lease and finished with fencing."""

    def claim(self, key: str, fields: dict[str, Any]) -> Claim | Held:
        """Claim the run for a new attempt, or say who holds it (a lost race is Held in progress)."""
        ...

    def exists(self, key: str) -> bool:
        """Whether the run has a record, in any state."""
        ...

    def complete(self, claim: Claim, stored: StoredResult) -> StoredResult | None:
        """Record success with `stored`; the result as recorded, or None if the claim was lost."""
        ...

    def fail(self, claim: Claim, error: str) -> bool:
        """Record a permanent failure; False if the claim was lost (nothing written)."""
        ...

    def release(self, claim: Claim) -> bool:
        """Delete the claim so a retry runs at once; False if the claim was lost."""
        ...

    def hold(self, claim: Claim, seconds: float, reason: str) -> bool:
        """Keep the claim in progress for `seconds` from now, noting why; False if it was lost."""
        ...

    def read(self, key: str) -> dict[str, Any] | None:
        """The run's record, or None."""
        ...

    def annotate(self, key: str, fields: dict[str, Any]) -> None:
        """Add `fields` to a finished run's record."""
        ...
