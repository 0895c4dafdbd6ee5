"""A local Cloud Scheduler for runonce: the team files' jobs, served by functions-framework
instances on the Firestore emulator, delivered at least once with injected faults on an
accelerated clock, and judged run by run from the store.

scheduler (plan, triggers, attempts, retries, faults) -> hosts (the instances serving a function)
-> store (ledger and effects) -> verdicts (per run and per message, and their tables) -> picture.
Event jobs come through pubsub (the emulator's topology and the push proxy) instead of the
scheduler. `demo` plays the parts in demos/ for `make demo`; `clock` and `folder_file` serve them
all.
"""
