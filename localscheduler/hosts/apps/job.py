"""The job every demo service runs, and the in-server faults it honours.

Its effect is one Firestore document in the collection SERVICES_OUTBOX_VARIABLE names, created
under the run key's id with the run key in `run_key` (the verdict counts documents by that
field, so a second effect of a run under any id would be seen). Created, not set: if an earlier
attempt of the same run already wrote it (it died after the effect, before runonce recorded the
completion, and the lease expired), `AlreadyExists` means the effect is done, as in
functions/report.

Faults, read from the request's headers and honoured only for the run they name (a run key):
`pool.KILL_HEADER` kills the whole instance (its process group) once the body started, before the
effect: the claim is held and never released, as when an instance crashes mid-run.
DIE_AFTER_EFFECT_HEADER kills it right after the effect, before runonce writes the completion.
WORK_HEADER is how long the body takes (seconds) before its effect.
"""

from __future__ import annotations

import functools
import os
import signal
import time
from collections.abc import Mapping

from google.api_core.exceptions import AlreadyExists
from google.cloud import firestore

import runonce
from localscheduler.hosts.pool import KILL_HEADER
from runonce.core.event import EventRun
from runonce.core.run import Run

SERVICES_OUTBOX_VARIABLE = "RUNONCE_LOCAL_OUTBOX"
DIE_AFTER_EFFECT_HEADER = "X-Localscheduler-Die-After-Effect"
WORK_HEADER = "X-Localscheduler-Work-Seconds"
RUN_KEY_FIELD = "run_key"
RUNONCE_FIELD = "runonce"
"""Where the instance imported runonce from (its __init__.py): the installed wheel or the source tree."""


@functools.cache
def _client() -> firestore.Client:
    return firestore.Client()


def warm_up() -> None:
    """One Firestore write, so the process's one-off gRPC start-up (about 2 s) is paid while the app
    loads, before it serves (Cloud Run's startup probe, locally): every app calls it at import."""
    _client().collection("localscheduler_warmup").document("probe").set({"warm": True})


def work_seconds(headers: Mapping[str, str]) -> float:
    """How long the body takes before its effect."""
    return float(headers.get(WORK_HEADER) or 0)


def die_if_named(headers: Mapping[str, str], header: str, run: Run | EventRun) -> None:
    """SIGKILL this instance's whole process group if `header` names this run."""
    if headers.get(header) == run.key:
        os.killpg(os.getpgrp(), signal.SIGKILL)


def effect(run: Run | EventRun, headers: Mapping[str, str], host: str) -> dict[str, object]:
    """The run's one effect (created once), with the faults around it."""
    die_if_named(headers, KILL_HEADER, run)
    document = _client().collection(os.environ[SERVICES_OUTBOX_VARIABLE]).document(run.key)
    try:
        document.create(
            {
                RUN_KEY_FIELD: run.key,
                "attempt_id": run.attempt_id,
                "host": host,
                RUNONCE_FIELD: runonce.__file__,
            }
        )
        written = True
    except AlreadyExists:
        written = False
    die_if_named(headers, DIE_AFTER_EFFECT_HEADER, run)
    return {"effect": run.key, "written": written}


def close(run: Run | EventRun, headers: Mapping[str, str], host: str) -> dict[str, object]:
    """A synchronous job: work, then the effect."""
    time.sleep(work_seconds(headers))
    return effect(run, headers, host)
