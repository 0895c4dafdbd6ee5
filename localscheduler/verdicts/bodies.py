"""What the job bodies did, read from the lines the runonce core writes around every body.

The ledger keeps only a run's latest claim, so it cannot say how often a job body started or
whether two bodies of one run ever ran at the same time. The core logs a line when a body starts
and one when it ends, saying how (see `runonce.contract.BodyEnd`); a body whose instance was
killed mid-run has no end line. Any job's bodies are read the same way: nothing here knows what a
job does. Times are the wall clock, mapped onto the simulated clock the scheduler journals in.
"""

from __future__ import annotations

import itertools
import json
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from pathlib import Path

from localscheduler.clock import AcceleratedClock
from runonce.contract import BODY_END_FIELD, BODY_ERROR_FIELD, BODY_FIELD, WALL_TIME_FIELD, BodyEnd, BodyStage


@dataclass(frozen=True)
class Body:
    """One start of the job body for one claim of a run."""

    run_key: str
    attempt_id: str
    instance: str
    """The instance (log file) that ran it."""
    started: datetime
    """Simulated time the body started."""
    ended: datetime | None = None
    """Simulated time the body ended; None if it never did (its instance was killed)."""
    end: BodyEnd | None = None
    """How the core read its ending; None if it never ended."""
    error: str | None = None
    """The exception's class name when the body raised."""

    @property
    def retryable(self) -> bool:
        """It ended in a way that gives the run back for another attempt."""
        return self.end in (BodyEnd.RETRYABLE, BodyEnd.STOPPED, BodyEnd.HELD)


def read_bodies(log_dir: Path, clock: AcceleratedClock) -> dict[str, list[Body]]:
    """Every job body in the instance logs of `log_dir`, by run key, in the order they started."""
    starts: dict[str, Body] = {}
    ends: dict[str, dict] = {}
    for path in sorted(log_dir.glob("*.log")):
        for text in path.read_text(errors="replace").splitlines():
            line = _json(text)
            if not {BODY_FIELD, "attempt_id", "run_key", WALL_TIME_FIELD} <= line.keys():
                continue
            if line[BODY_FIELD] == BodyStage.STARTED.value:
                at = _simulated(line, clock)
                starts[line["attempt_id"]] = Body(line["run_key"], line["attempt_id"], path.stem, at)
            elif line[BODY_FIELD] == BodyStage.ENDED.value:
                ends[line["attempt_id"]] = line
    bodies: dict[str, list[Body]] = defaultdict(list)
    for attempt_id, body in starts.items():
        end = ends.get(attempt_id)
        if end is not None:
            body = replace(
                body,
                ended=_simulated(end, clock),
                end=BodyEnd(end[BODY_END_FIELD]),
                error=end.get(BODY_ERROR_FIELD),
            )
        bodies[body.run_key].append(body)
    return {key: sorted(runs, key=lambda b: b.started) for key, runs in bodies.items()}


def succession_problems(bodies: Sequence[Body], death: Callable[[Body], datetime | None]) -> list[str]:
    """What the order of one run's bodies (in start order) contradicts: two at the same time, or
    one started again after a body that was neither killed nor ended retryably. `death` says when
    a body's instance died under it (None: it did not); a killed body ends then."""
    problems = []
    for earlier, later in itertools.pairwise(bodies):
        died = death(earlier)
        end = earlier.ended or died
        if end is None:
            problems.append(f"body {earlier.attempt_id} never ended and its instance was not killed")
        elif end > later.started:
            problems.append(f"bodies {earlier.attempt_id} and {later.attempt_id} ran at the same time")
        if not earlier.retryable and died is None:
            how = "killed" if earlier.end is None else earlier.end.value
            problems.append(f"body started again after {earlier.attempt_id} ended {how}")
    return problems


def _simulated(line: dict, clock: AcceleratedClock) -> datetime:
    return clock.at_wall(datetime.fromisoformat(line[WALL_TIME_FIELD]).timestamp())


def _json(text: str) -> dict:
    """A log line as JSON; {} for anything else (gunicorn's own lines, a line cut by a kill)."""
    if not text.startswith("{"):
        return {}
    try:
        value = json.loads(text)
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}
