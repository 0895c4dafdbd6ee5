"""A local Cloud Scheduler for runonce: the team files' jobs, served by functions-framework
instances on the Firestore emulator, delivered at least once with injected faults on an
accelerated clock, and judged run by run from the store.

plan (cron in the job's zone) -> scheduler (triggers, attempts, retries, faults) -> instances
(functions-framework processes) -> store (ledger and outbox) -> report (verdicts, table).
"""
