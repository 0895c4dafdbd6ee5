"""The team-file names of Google API targets (`Job(target=Workflow(...))`), as team files
written against `stacks.targets` import them; `stacks/config/targets.py` defines them."""

from __future__ import annotations

from stacks.config.targets import (
    TARGET_CLASSES,
    TARGET_VARIABLE,
    BuildTrigger,
    CloudRunJob,
    GoogleApi,
    Target,
    Workflow,
    target_json,
)

__all__ = [
    "TARGET_CLASSES",
    "TARGET_VARIABLE",
    "BuildTrigger",
    "CloudRunJob",
    "GoogleApi",
    "Target",
    "Workflow",
    "target_json",
]
