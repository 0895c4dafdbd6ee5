"""The job every test app runs: it notes its start (process) in RUNONCE_TEST_STARTED, then
appends its effect (run key, process) to the file RUNONCE_TEST_EFFECTS after sleeping
`X-Test-Sleep` seconds; `X-Test-Fail: permanent` fails it."""

from __future__ import annotations

import os
import time
from collections.abc import Mapping

import runonce


def before(headers: Mapping[str, str]) -> float:
    """Note the start (this process's id, so a test can kill it mid-run); the seconds the job
    then waits before its effect (the header `X-Test-Sleep`)."""
    with open(os.environ["RUNONCE_TEST_STARTED"], "a") as started:
        started.write(f"{runonce.current_run().key} {os.getpid()}\n")
    return float(headers.get("X-Test-Sleep") or 0)


def effect(headers: Mapping[str, str]) -> dict[str, str]:
    """The job's one effect, written once per run that reaches it; PermanentError if asked."""
    if headers.get("X-Test-Fail") == "permanent":
        raise runonce.PermanentError("the test asked for a permanent failure")
    key = runonce.current_run().key
    with open(os.environ["RUNONCE_TEST_EFFECTS"], "a") as effects:
        effects.write(f"{key} {os.getpid()}\n")
    return {"effect": key}


def body(headers: Mapping[str, str]) -> dict[str, str]:
    """A synchronous job: wait, then the effect."""
    time.sleep(before(headers))
    return effect(headers)
