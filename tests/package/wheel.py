"""The session fixtures of the installed wheel: `runonce_wheel` and `installed_runonce`, built with
localscheduler/hosts/wheel.py (its docstring says how, offline), once per session."""

from __future__ import annotations

from pathlib import Path

import pytest

from localscheduler.hosts.wheel import (
    LIBRARY as LIBRARY,
)
from localscheduler.hosts.wheel import (
    ROOT as ROOT,
)
from localscheduler.hosts.wheel import (
    build_wheel,
    install,
)
from localscheduler.hosts.wheel import (
    installed_environment as installed_environment,
)
from localscheduler.hosts.wheel import (
    library_files as library_files,
)


@pytest.fixture(scope="session")
def runonce_wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The runonce wheel, built once per session (see the module docstring)."""
    return build_wheel(tmp_path_factory.mktemp("wheel"))


@pytest.fixture(scope="session")
def installed_runonce(runonce_wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The python of a fresh venv that imports runonce from the installed wheel, every extra's
    packages importable (see the module docstring); run it with `installed_environment()`."""
    return install(runonce_wheel, tmp_path_factory.mktemp("venv") / "runonce")
