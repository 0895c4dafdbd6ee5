"""The run stores: the Firestore run ledger, the core's `Store` in production, and `memory`, the
same `Store` in this process's memory (no Google library) for the fast tests of the decision logic.

`firestore` holds the ledger (claim under a lease, finish fenced by the claim's update time) and
its `Store` face with Google's exceptions translated; `_commit` sends its two happy-path writes as
direct Commit requests; `_budget` bounds the calls of one operation; `connection` builds the
settings, the client and the store of one decorated function at first use; `_records` reads a
record into what a claim is told. `valkey` is the same `Store` on Valkey or Redis 7 (the `valkey`
extra), each operation one server-side function (`valkey.lua`); nothing imports it unless chosen.
"""
