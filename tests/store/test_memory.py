"""What the in-memory store is beyond the conformance suite: part of the fast tier, so it loads no
Google library."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.fast


def test_importing_the_memory_store_loads_no_google_library():
    # `google` and `google.cloud` are namespace packages a .pth file may load at startup: count
    # only what the import adds.
    script = (
        "import sys; before = set(sys.modules); import runonce.store.memory; "
        "print(sorted(m for m in set(sys.modules) - before if m.split('.')[0] == 'google'))"
    )
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2] / "functions")}
    run = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True, env=env)
    out = run.stdout
    assert out.strip() == "[]"
