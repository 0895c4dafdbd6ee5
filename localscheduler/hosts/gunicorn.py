"""The gunicorn host: a WSGI app (Flask, Django) served as a Cloud Run service would serve it.

An instance is gunicorn with one worker and one thread (Cloud Run with concurrency 1) serving
the app object `target` of the module file `source` (e.g. localscheduler/hosts/apps/flask_app.py,
`app`). The app honours `pool.KILL_HEADER` itself (localscheduler/hosts/apps/job.py).
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path

from stacks.team import REPO_ROOT


def app_reference(source: Path, target: str) -> str:
    """`module:attribute` of the app object `target` in the file `source`, under the repository."""
    module = ".".join(source.resolve().relative_to(REPO_ROOT).with_suffix("").parts)
    return f"{module}:{target}"


@dataclass(frozen=True)
class Gunicorn:
    """A `localscheduler.hosts.pool.Host` running gunicorn, one sync worker, one thread."""

    python: Path | None = None
    """The interpreter to run it with: a venv where runonce is installed from its wheel (then the
    source tree's functions/ leaves the instance's PYTHONPATH); this one's, by default."""

    def command(self, source: Path, target: str, port: int) -> list[str]:
        """gunicorn serving `target` of `source` on 127.0.0.1:`port`."""
        return [
            str(self.python or sys.executable),
            "-m",
            "gunicorn",
            "--workers",
            "1",
            "--threads",
            "1",
            "--bind",
            f"127.0.0.1:{port}",
            app_reference(source, target),
        ]

    def environment(self, source: Path, target: str) -> dict[str, str]:
        """With an installed runonce, a PYTHONPATH of the repository alone (the demo's own code, not
        functions/): runonce comes from the wheel; otherwise nothing beyond the pool's."""
        return {"PYTHONPATH": str(REPO_ROOT)} if self.python else {}
