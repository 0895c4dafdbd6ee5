"""The team-file name of shared Terraform state (`Team(state=GcsState(...))`), as team files
written against `stacks.state` import it; `stacks/config/state.py` defines it."""

from __future__ import annotations

from stacks.config.state import GcsState

__all__ = ["GcsState"]
