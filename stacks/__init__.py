"""The stacks: one Terraform stack per team file (docs/stacks.md).

They use the library's own definitions (its contract and its target schema, which need only the
standard library), so the library's folder goes on the import path here when the process has not
put it there (a bare `npx cdktf synth`; the Makefile and pytest do).
"""

import sys
from pathlib import Path

_FUNCTIONS = str(Path(__file__).resolve().parent.parent / "functions")
if _FUNCTIONS not in sys.path:
    sys.path.append(_FUNCTIONS)
