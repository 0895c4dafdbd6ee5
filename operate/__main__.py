"""`python -m operate ...` is the `runonce` command."""

from operate.cli import runonce

runonce(prog_name="runonce")
