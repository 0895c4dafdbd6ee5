"""The uvicorn host: an ASGI app (FastAPI) served as a Cloud Run service would serve it.

An instance is one uvicorn process serving the app object `target` of the module file
`source`, one request at a time from the pool (Cloud Run with concurrency 1). The app honours
`pool.KILL_HEADER` itself (localscheduler/hosts/apps/job.py).
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path

from localscheduler.hosts.gunicorn import app_reference
from stacks.team import REPO_ROOT


@dataclass(frozen=True)
class Uvicorn:
    """A `localscheduler.hosts.pool.Host` running uvicorn, one process."""

    python: Path | None = None
    """The interpreter to run it with: a venv where runonce is installed from its wheel (then the
    source tree's functions/ leaves the instance's PYTHONPATH); this one's, by default."""

    def command(self, source: Path, target: str, port: int) -> list[str]:
        """uvicorn serving `target` of `source` on 127.0.0.1:`port`."""
        return [
            str(self.python or sys.executable),
            "-m",
            "uvicorn",
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--no-access-log",
            app_reference(source, target),
        ]

    def environment(self, source: Path, target: str) -> dict[str, str]:
        """With an installed runonce, a PYTHONPATH of the repository alone (the demo's own code, not
        functions/): runonce comes from the wheel; otherwise nothing beyond the pool's."""
        return {"PYTHONPATH": str(REPO_ROOT)} if self.python else {}
