"""The uvicorn host: an ASGI app (FastAPI) served as a Cloud Run service would serve it.

An instance is one uvicorn process serving the app object `target` of the module file
`source`, one request at a time from the pool (Cloud Run with concurrency 1). The app honours
`pool.KILL_HEADER` itself (localscheduler/hosts/apps/job.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from localscheduler.hosts.server import ServerHost, app_reference


@dataclass(frozen=True)
class Uvicorn(ServerHost):
    """A `localscheduler.hosts.pool.Host` running uvicorn, one process."""

    def command(self, source: Path, target: str, port: int) -> list[str]:
        """uvicorn serving `target` of `source` on 127.0.0.1:`port`."""
        return self.run_module(
            "uvicorn",
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--no-access-log",
            app_reference(source, target),
        )
