"""`@deduplicated`, the Cloud Scheduler adapter: headers -> delivery -> run key -> the core.

`delivery` reads the Scheduler headers (and decides whether a run was forced), `keys` hashes a
delivery into its run key, `adapter` is the decorator.
"""
