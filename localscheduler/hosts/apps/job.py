"""The jobs every service runs (a scheduled one, `close`, and an event one, `order`), and the
faults they honour.

Each effect is one Firestore document in the collection SERVICES_OUTBOX_VARIABLE names, created
under the run key's id with the run key in `run_key` and the attempt in `attempt_id` (the
verdicts count documents by that field, so a second effect of a run under any id would be seen).
Created, not set: if an earlier attempt of the same run already wrote it (it died after the
effect, before runonce recorded the completion, and the lease expired), `AlreadyExists` means the
effect is done, as in functions/report. With UNKEYED_VARIABLE set to 1 the effect is appended
under an id of its own instead: the counter-example the chaos suite shows a second effect with.

Faults of the scheduled job (`Knobs`), honoured only for the run they name (a run key) when a
header asks: `pool.KILL_HEADER` kills the whole instance (its process group) once the body
started, before the effect: the claim is held and never released, as when an instance crashes
mid-run. DIE_AFTER_EFFECT_HEADER kills it right after the effect, before runonce writes the
completion. WORK_HEADER is how long the body takes (seconds) before its effect. The local
scheduler asks in the request's JSON body instead, as functions/report reads it: `work_seconds`,
`fail` ("retryable" raises an ordinary error, "permanent" PermanentError) and `kill_after_effect`.
The event job reads the message attributes as functions/events_example does (`order`).
"""

from __future__ import annotations

import functools
import json
import os
import signal
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TypeVar

from google.api_core.exceptions import AlreadyExists
from google.cloud import firestore

import runonce
from localscheduler.clock import follow_local_clock
from localscheduler.hosts.pool import KILL_HEADER
from runonce.core.event import Event, EventRun
from runonce.core.run import Run

SERVICES_OUTBOX_VARIABLE = "RUNONCE_LOCAL_OUTBOX"
UNKEYED_VARIABLE = "RUNONCE_LOCAL_UNKEYED_EFFECT"
DIE_AFTER_EFFECT_HEADER = "X-Localscheduler-Die-After-Effect"
WORK_HEADER = "X-Localscheduler-Work-Seconds"
RUN_KEY_FIELD = "run_key"
ATTEMPT_ID_FIELD = "attempt_id"
RUNONCE_FIELD = "runonce"
"""Where the instance imported runonce from (its __init__.py): the installed wheel or the source tree."""
T = TypeVar("T")


@functools.cache
def _client() -> firestore.Client:
    return firestore.Client()


def start() -> None:
    """What every app does as it loads, before it serves: follow the local scheduler's clock if
    the instance has one, and one Firestore write, so the process's one-off gRPC start-up (about
    2 s) is paid before the first request (Cloud Run's startup probe, locally)."""
    follow_local_clock()
    _client().collection("localscheduler_warmup").document("probe").set({"warm": True})


@dataclass(frozen=True)
class Knobs:
    """What one delivery of a run asks the scheduled job to do (see the module docstring)."""

    work_seconds: float = 0.0
    fail: str = ""
    die_before_effect: bool = False
    die_after_effect: bool = False

    @classmethod
    def read(cls, run: Run | EventRun, headers: Mapping[str, str], body: bytes = b"") -> Knobs:
        """The knobs of the request's headers and JSON body that apply to `run`."""
        try:
            asked = json.loads(body or b"{}")
        except ValueError:
            asked = {}
        asked = asked if isinstance(asked, dict) else {}
        return cls(
            work_seconds=float(headers.get(WORK_HEADER) or asked.get("work_seconds") or 0),
            fail=str(asked.get("fail") or ""),
            die_before_effect=headers.get(KILL_HEADER) == run.key,
            die_after_effect=(
                headers.get(DIE_AFTER_EFFECT_HEADER) == run.key or bool(asked.get("kill_after_effect"))
            ),
        )

    def fail_if_asked(self) -> None:
        """Raise the failure the delivery asks for, if any."""
        if self.fail == "permanent":
            raise runonce.PermanentError("the report source rejected the request (knob fail=permanent)")
        if self.fail == "retryable":
            raise RuntimeError("the report source timed out (knob fail=retryable)")


def _die() -> None:
    # The whole instance dies, as on a crash or an OOM kill: runonce never writes the completion.
    os.killpg(os.getpgrp(), signal.SIGKILL)


def _write(run: Run | EventRun, host: str) -> bool:
    """The run's effect; False if an earlier body of the run already wrote it."""
    outbox = _client().collection(os.environ[SERVICES_OUTBOX_VARIABLE])
    effect = {RUN_KEY_FIELD: run.key, ATTEMPT_ID_FIELD: run.attempt_id, "host": host}
    effect[RUNONCE_FIELD] = runonce.__file__
    if os.environ.get(UNKEYED_VARIABLE) == "1":
        outbox.add(effect)
        return True
    try:
        outbox.document(run.key).create(effect)
    except AlreadyExists:
        return False
    return True


def faulted(knobs: Knobs, write: Callable[[], T]) -> T:
    """`write`, a run's effect, with the instance deaths the delivery asks for around it."""
    if knobs.die_before_effect:
        _die()
    written = write()
    if knobs.die_after_effect:
        _die()
    return written


def effect(run: Run | EventRun, knobs: Knobs, host: str) -> dict[str, object]:
    """The run's one effect (created once), with the faults around it."""
    return {"effect": run.key, "written": faulted(knobs, lambda: _write(run, host))}


def close(run: Run | EventRun, knobs: Knobs, host: str) -> dict[str, object]:
    """The scheduled job: work, fail if asked, then the effect."""
    time.sleep(knobs.work_seconds)
    knobs.fail_if_asked()
    return effect(run, knobs, host)


def _first_time(run: EventRun) -> bool:
    """True for the first body of this run to get here (it leaves a marker), False for any later."""
    marks = _client().collection(os.environ[SERVICES_OUTBOX_VARIABLE] + "_fault_marks")
    try:
        marks.document(run.key).create({ATTEMPT_ID_FIELD: run.attempt_id})
    except AlreadyExists:
        return False
    return True


def order(run: EventRun, event: Event, headers: Mapping[str, str], host: str) -> dict[str, object]:
    """The event job: store the pushed order once. Its knobs are the message attributes, as
    functions/events_example reads them: `work_seconds`, and `fault`: `retryable` (the first body
    raises an ordinary error), `always_retryable` (every body does), `permanent`,
    `kill_before_effect` and `kill_after_effect` (the first body's instance dies before, or right
    after, the effect). `pool.KILL_HEADER` naming the run kills the instance before the effect."""
    fault = event.attributes.get("fault", "")
    time.sleep(float(event.attributes.get("work_seconds", 0)))
    if fault == "permanent":
        raise runonce.PermanentError("order rejected (knob fault=permanent)")
    if fault == "always_retryable" or (fault == "retryable" and _first_time(run)):
        raise RuntimeError(f"order service timed out (knob fault={fault})")
    if headers.get(KILL_HEADER) == run.key or (fault == "kill_before_effect" and _first_time(run)):
        _die()
    written = _write(run, host)
    if fault == "kill_after_effect" and _first_time(run):
        _die()
    return {"order": run.key, "stored": written}
