"""The gunicorn host: a WSGI app (Flask, Django) served as a Cloud Run service would serve it.

An instance is gunicorn with one worker and one thread (Cloud Run with concurrency 1) serving
the app object `target` of the module file `source` (e.g. localscheduler/hosts/apps/flask_app.py,
`app`). The app honours `pool.KILL_HEADER` itself (localscheduler/hosts/apps/job.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from localscheduler.hosts.server import ServerHost, app_reference


@dataclass(frozen=True)
class Gunicorn(ServerHost):
    """A `localscheduler.hosts.pool.Host` running gunicorn, one sync worker, one thread."""

    def command(self, source: Path, target: str, port: int) -> list[str]:
        """gunicorn serving `target` of `source` on 127.0.0.1:`port`."""
        return self.run_module(
            "gunicorn",
            "--workers",
            "1",
            "--threads",
            "1",
            "--bind",
            f"127.0.0.1:{port}",
            app_reference(source, target),
        )
