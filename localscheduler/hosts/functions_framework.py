"""The functions-framework host: what Cloud Run functions runs a deployed function with.

An instance is `functions-framework` (gunicorn, one worker, one thread) serving `function_source`,
which puts the instance on the scheduler's clock and loads the function folder's main.py, and
exposes its entry point unchanged.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path

from localscheduler.hosts.probe import accepts

FUNCTION_SOURCE = Path(__file__).with_name("function_source.py")


@dataclass(frozen=True)
class FunctionsFramework:
    """A `localscheduler.hosts.pool.Host` running functions-framework over `function_source`."""

    def command(self, source: Path, target: str, port: int) -> list[str]:
        """functions-framework serving `target` through `function_source` on 127.0.0.1:`port`."""
        return [
            sys.executable,
            "-m",
            "functions_framework",
            "--source",
            str(FUNCTION_SOURCE),
            "--target",
            target,
            # Explicit: a FUNCTION_SIGNATURE_TYPE in the environment would otherwise win.
            "--signature-type",
            "http",
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
        ]

    def environment(self, source: Path, target: str) -> dict[str, str]:
        """Where `function_source` finds the function, and one worker with one thread."""
        return {
            "RUNONCE_LOCAL_SOURCE": str(source),
            "RUNONCE_LOCAL_TARGET": target,
            "WORKERS": "1",
            "THREADS": "1",
        }

    def serving(self, port: int) -> bool:
        """The port accepts connections: functions-framework loads the function before it listens."""
        return accepts(port)
