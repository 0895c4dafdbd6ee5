"""What the stacks share with the code that reads them: the library and the policy pack.

The stacks need the names the library reads (its `RUNONCE_*` variables), from the one source,
runonce's contract module (`runonce.contract`, functions/runonce/contract.py). The `runonce`
package loads Google's clients only when a decorator is first used, so importing its contract
costs the standard library alone (`stacks/__init__.py` puts the library on the path). The policy pack
(`policy/`) reads the synthesized stacks; what it recognizes there that the stacks write on
purpose is named at the end.
"""

from __future__ import annotations

from runonce.contract import (
    CLAIMED_AT_FIELD,
    DATABASE_VARIABLE,
    DEAD_LETTER_MESSAGE_ID_FIELD,
    DEAD_LETTER_TOPIC_VARIABLE,
    EVENT_CONSUMER_FIELD,
    EVENT_SOURCE_FIELD,
    JOB_VARIABLE,
    MAX_EVENT_AGE_VARIABLE,
    MISSED_RUN_FIELD,
    PAUSED_FIELD,
    STORE_VARIABLE,
    TARGET_GRACE_VARIABLE,
    TARGET_VARIABLE,
    WATCHDOG_JOBS_VARIABLE,
    WATCHDOG_LEDGER_COLLECTION_VARIABLE,
    WATCHDOG_LEDGER_DATABASE_VARIABLE,
    WATCHDOG_LOCATION_VARIABLE,
    WATCHDOG_LOGGER,
    WATCHDOG_TEAM_VARIABLE,
)

RETIRING_ACCOUNT = "runonce: retiring per-job account, removed by the next apply (docs/stacks.md, Migration)"
"""The description of a per-job account kept for one apply during the migration to shared
accounts (stacks/constructs/legacy_accounts.py); the policy rule RO-IAM-4 lets such an account be unused."""
ACKNOWLEDGED = "//.runonce.acknowledged"
"""Where a stack carries its team's acknowledgements (`Team.acknowledge`) for the policy pack:
under the document's top-level `//` property, which Terraform ignores as a comment."""

__all__ = [
    "ACKNOWLEDGED",
    "CLAIMED_AT_FIELD",
    "DATABASE_VARIABLE",
    "DEAD_LETTER_MESSAGE_ID_FIELD",
    "DEAD_LETTER_TOPIC_VARIABLE",
    "EVENT_CONSUMER_FIELD",
    "EVENT_SOURCE_FIELD",
    "JOB_VARIABLE",
    "MAX_EVENT_AGE_VARIABLE",
    "MISSED_RUN_FIELD",
    "PAUSED_FIELD",
    "RETIRING_ACCOUNT",
    "STORE_VARIABLE",
    "TARGET_GRACE_VARIABLE",
    "TARGET_VARIABLE",
    "WATCHDOG_JOBS_VARIABLE",
    "WATCHDOG_LEDGER_COLLECTION_VARIABLE",
    "WATCHDOG_LEDGER_DATABASE_VARIABLE",
    "WATCHDOG_LOCATION_VARIABLE",
    "WATCHDOG_LOGGER",
    "WATCHDOG_TEAM_VARIABLE",
]
