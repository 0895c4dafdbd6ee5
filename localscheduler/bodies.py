"""What the job bodies did, read from the example job's own log lines in the instance logs.

The ledger keeps only a run's latest claim, so it cannot say how often a job body started or
whether two bodies of one run ever ran at the same time. The example job logs a line when its
body starts and one when it ends (published, already published, or raised); a body whose
instance was killed mid-run has no end line. Times are the job's wall clock, mapped onto the
simulated clock the scheduler journals in.
"""

from __future__ import annotations

import json
from collections import defaultdict
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from .clock import AcceleratedClock

STARTED = "report job started"


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
    """Simulated time the body logged its end; None if it never did (its instance was killed)."""
    outcome: str | None = None
    """"published", "already published" (an earlier attempt's effect was there), or "raised"."""
    error: str | None = None
    """The exception's class name when the body raised."""

    @property
    def published(self) -> bool:
        """This body wrote the run's effect."""
        return self.outcome == "published"

    @property
    def found_published(self) -> bool:
        """This body reached the effect and found it already written by an earlier attempt."""
        return self.outcome == "already published"


def read_bodies(log_dir: Path, clock: AcceleratedClock) -> dict[str, list[Body]]:
    """Every job body in the instance logs of `log_dir`, by run key, in the order they started."""
    starts: dict[str, Body] = {}
    ends: dict[str, dict] = {}
    for path in sorted(log_dir.glob("*.log")):
        for text in path.read_text(errors="replace").splitlines():
            line = _json(text)
            if "attempt_id" not in line or "run_key" not in line:
                continue
            if line.get("message") == STARTED:
                at = clock.at_wall(datetime.fromisoformat(line["time"]).timestamp())
                starts[line["attempt_id"]] = Body(line["run_key"], line["attempt_id"], path.stem, at)
            elif "ended" in line:
                ends[line["attempt_id"]] = line
    bodies: dict[str, list[Body]] = defaultdict(list)
    for attempt_id, body in starts.items():
        end = ends.get(attempt_id)
        if end is not None:
            body = Body(
                body.run_key,
                attempt_id,
                body.instance,
                body.started,
                clock.at_wall(datetime.fromisoformat(end["time"]).timestamp()),
                end["ended"],
                end.get("error"),
            )
        bodies[body.run_key].append(body)
    return {key: sorted(runs, key=lambda b: b.started) for key, runs in bodies.items()}


def _json(text: str) -> dict:
    """A log line as JSON; {} for anything else (gunicorn's own lines, a line cut by a kill)."""
    if not text.startswith("{"):
        return {}
    try:
        value = json.loads(text)
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}
