"""What the Python web servers the demo runs as Cloud Run services share (gunicorn, uvicorn): the
interpreter they run with, and where their app and runonce come from."""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path

from localscheduler.hosts.probe import answers
from stacks.team import REPO_ROOT


def app_reference(source: Path, target: str) -> str:
    """`module:attribute` of the app object `target` in the file `source`, under the repository."""
    module = ".".join(source.resolve().relative_to(REPO_ROOT).with_suffix("").parts)
    return f"{module}:{target}"


@dataclass(frozen=True)
class ServerHost:
    """A `localscheduler.hosts.pool.Host` that runs a server module with `python -m`."""

    python: Path | None = None
    """The interpreter to run it with: a venv where runonce is installed from its wheel (then the
    source tree's functions/ leaves the instance's PYTHONPATH); this one's, by default."""

    def run_module(self, *arguments: str) -> list[str]:
        """`python -m` with `arguments`, by the host's interpreter."""
        return [str(self.python or sys.executable), "-m", *arguments]

    def environment(self, source: Path, target: str) -> dict[str, str]:
        """With an installed runonce, a PYTHONPATH of the repository alone (the demo's own code, not
        functions/): runonce comes from the wheel; otherwise nothing beyond the pool's."""
        return {"PYTHONPATH": str(REPO_ROOT)} if self.python else {}

    def serving(self, port: int) -> bool:
        """An HTTP request is answered: the server may listen before its app is loaded."""
        return answers(port)
