"""The idempotent proxy: a Scheduler job whose target is a Google API, started once per run.

No team code is needed: the stack deploys this folder with runonce, sets RUNONCE_TARGET to the
target's JSON (docs/targets.md) and runs it as an account holding only the target's role and
the ledger grant. Scheduler calls it with OIDC like any other runonce job.
"""

import functions_framework

from runonce import deduplicated
from runonce.targets.proxy import Proxy

handle = functions_framework.http(deduplicated(Proxy()))
