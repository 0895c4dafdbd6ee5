"""`make install` writes .venv/bin/runonce, a script that runs the command from any directory."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.fast  # no emulator: the rule and the script alone

ROOT = Path(__file__).resolve().parents[2]


def test_the_install_rule_writes_a_runonce_script_that_works_from_any_directory(tmp_path):
    venv = tmp_path / "venv"
    (venv / "bin").mkdir(parents=True)
    script = venv / "bin" / "runonce"
    # The rule alone: the environment is given (PY, and a STAMP that make is told never to remake
    # with -o, whatever the files' times), so nothing is installed. A STAMP of an existing file
    # would not do: on a fresh clone git may write requirements.txt after it, and make would
    # then create a venv and pip-install every requirement.
    stamp = tmp_path / "installed"
    subprocess.run(
        [
            "make",
            "--no-print-directory",
            f"VENV={venv}",
            f"STAMP={stamp}",
            f"--old-file={stamp}",
            f"PY={sys.executable}",
            str(script),
        ],
        cwd=ROOT,
        check=True,
        capture_output=True,
        timeout=60,
    )
    run = subprocess.run(
        [str(script), "runs", "--team", "nosuchteam"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 2, run.stderr
    assert run.stderr.startswith("Usage: runonce runs") and "Known stacks: example" in run.stderr
