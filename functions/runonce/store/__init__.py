"""The Firestore run ledger, the first implementation of the core's `Store`.

`firestore` holds the ledger (claim under a lease, finish fenced by the claim's update time) and
its `Store` face with Google's exceptions translated; `_commit` sends its two happy-path writes as
direct Commit requests; `_budget` bounds the calls of one operation; `connection` builds the
settings, the client and the store of one decorated function at first use.
"""
