"""runonce's contract module (functions/runonce/contract.py), loaded by its file path.

The stacks need the names the library reads (its `RUNONCE_*` variables) but must not import the
`runonce` package: its `__init__` loads the Google clients. The contract module imports only the
standard library, so loading that one file is cheap and keeps one source for the names.
"""

from __future__ import annotations

import importlib.util
import sys
import types

from stacks.config.team import FUNCTIONS_DIR

_NAME = "runonce_contract"


def _load() -> types.ModuleType:
    if _NAME in sys.modules:
        return sys.modules[_NAME]
    spec = importlib.util.spec_from_file_location(_NAME, FUNCTIONS_DIR / "runonce" / "contract.py")
    if spec is None or spec.loader is None:
        raise ImportError("functions/runonce/contract.py is missing")
    module = importlib.util.module_from_spec(spec)
    sys.modules[_NAME] = module
    spec.loader.exec_module(module)
    return module


_contract = _load()
MAX_EVENT_AGE_VARIABLE: str = _contract.MAX_EVENT_AGE_VARIABLE
"""RUNONCE_MAX_EVENT_AGE_SECONDS: events older than this are dead-lettered, not run."""
DEAD_LETTER_TOPIC_VARIABLE: str = _contract.DEAD_LETTER_TOPIC_VARIABLE
"""RUNONCE_DEAD_LETTER_TOPIC: the full topic path runonce forwards dead letters to."""
