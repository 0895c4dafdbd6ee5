"""runonce's contract module (`runonce.contract`, functions/runonce/contract.py), imported.

The stacks need the names the library reads (its `RUNONCE_*` variables), from the one source. The
`runonce` package loads Google's clients only when a decorator is first used, so importing its
contract costs the standard library alone. The library's folder is put on the import path when
the process has not put it there (a bare `npx cdktf synth`; the Makefile and pytest do).
"""

from __future__ import annotations

import sys

from stacks.team import FUNCTIONS_DIR

if str(FUNCTIONS_DIR) not in sys.path:
    sys.path.append(str(FUNCTIONS_DIR))

from runonce.contract import DEAD_LETTER_TOPIC_VARIABLE, MAX_EVENT_AGE_VARIABLE

__all__ = ["DEAD_LETTER_TOPIC_VARIABLE", "MAX_EVENT_AGE_VARIABLE"]
