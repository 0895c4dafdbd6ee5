"""The runonce wheel as a user installs it (built offline and installed into a fresh venv by
tests/package/wheel.py): it is the source tree's version and writes that version on its records
and log lines, every file of the library is in it, each extra requires exactly the pinned packages
it needs, every public module imports from the venv, and the venv's requirements hold together as
`pip check` sees them."""

from __future__ import annotations

import email.parser
import json
import re
import subprocess
import zipfile
from pathlib import Path

import runonce
from runonce.contract import VERSION_FIELD
from tests.core.test_version_package import LOCK, NEEDS
from tests.package.wheel import LIBRARY, ROOT, installed_environment, library_files

REQUIREMENT = re.compile(r'([A-Za-z0-9._-]+)==(\S+?)(?:\s*;\s*extra == "([a-z0-9_-]+)")?')


def in_venv(python: Path, *arguments: str) -> str:
    """Run the venv's python with `arguments` as a host would run it: installed_environment(),
    outside the source tree; its output."""
    done = subprocess.run(
        [str(python), *arguments],
        cwd=python.parent,
        env=installed_environment(),
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


def wheel_metadata(wheel: Path) -> email.message.Message:
    with zipfile.ZipFile(wheel) as archive:
        (name,) = [name for name in archive.namelist() if name.endswith(".dist-info/METADATA")]
        return email.parser.Parser().parsestr(archive.read(name).decode())


def public_modules() -> list[str]:
    """Every module of the library whose dotted name has no private part."""
    modules = []
    for path in sorted(LIBRARY.rglob("*.py")):
        parts = path.relative_to(LIBRARY.parent).with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        if not any(part.startswith("_") for part in parts):
            modules.append(".".join(parts))
    return modules


def test_the_wheel_is_runonce_at_the_source_trees_version_for_any_python(runonce_wheel):
    assert runonce_wheel.name == f"runonce-{runonce.__version__}-py3-none-any.whl"
    metadata = wheel_metadata(runonce_wheel)
    assert (metadata["Name"], metadata["Version"]) == ("runonce", runonce.__version__)


def test_the_venv_imports_runonce_from_the_installed_wheel_not_the_source_tree(installed_runonce):
    code = "import json, runonce; print(json.dumps([runonce.__file__, runonce.__version__]))"
    found = json.loads(in_venv(installed_runonce, "-c", code))
    installed = Path(found[0])
    assert installed.is_relative_to(installed_runonce.parents[1]) and "site-packages" in installed.parts
    assert not installed.is_relative_to(ROOT)
    assert found[1] == runonce.__version__


def test_the_installed_wheel_writes_its_own_version_on_records_and_log_lines(installed_runonce):
    code = (
        "import importlib.metadata, json, logging\n"
        "from datetime import timedelta\n"
        "from runonce._logs import log\n"
        "from runonce.contract import VERSION_FIELD\n"
        "from runonce.core.store import StoredResult\n"
        "from runonce.store.memory import MemoryStore\n"
        "store = MemoryStore(timedelta(seconds=60), timedelta(days=1))\n"
        "claim = store.claim('run', {'job': 'nightly-report'})\n"
        "claimed = store.read('run')[VERSION_FIELD]\n"
        "store.complete(claim, StoredResult.of(1))\n"
        "log(logging.INFO, 'a line')\n"
        "finished = store.read('run')[VERSION_FIELD]\n"
        "print(json.dumps([importlib.metadata.version('runonce'), claimed, finished]))\n"
    )
    line, found = in_venv(installed_runonce, "-c", code).splitlines()
    assert found == json.dumps([runonce.__version__] * 3)
    assert json.loads(line)[VERSION_FIELD] == runonce.__version__


def test_the_wheel_holds_every_file_of_the_library(runonce_wheel):
    with zipfile.ZipFile(runonce_wheel) as archive:
        packaged = {name for name in archive.namelist() if name.startswith("runonce/")}
    assert packaged == library_files(LIBRARY)


def test_the_venv_holds_every_file_of_the_library_py_typed_included(installed_runonce):
    installed = Path(
        in_venv(installed_runonce, "-c", "import runonce; print(runonce.__file__)").strip()
    ).parent
    assert "runonce/py.typed" in library_files(installed)
    assert library_files(installed) == library_files(LIBRARY)


def test_each_extra_requires_exactly_the_pinned_packages_it_needs(runonce_wheel):
    metadata = wheel_metadata(runonce_wheel)
    required: dict[str | None, dict[str, str]] = {}
    for value in metadata.get_all("Requires-Dist"):
        match = REQUIREMENT.fullmatch(value)
        assert match, f"Requires-Dist {value!r} is not `name==version`, optionally for one extra"
        required.setdefault(match[3], {})[match[1].lower()] = match[2]
    assert set(metadata.get_all("Provides-Extra")) == set(NEEDS) - {None}
    assert required == {extra: {name: LOCK[name] for name in names} for extra, names in NEEDS.items()}


def test_every_public_module_imports_from_the_venv(installed_runonce):
    modules = public_modules()
    assert {"runonce", "runonce.core", "runonce.scheduler.watchdog", "runonce.targets.proxy"} <= set(modules)
    code = (
        "import importlib, json\n"
        "found = {}\n"
        f"for name in {modules!r}:\n"
        "    try:\n"
        "        found[name] = importlib.import_module(name).__file__\n"
        "    except Exception as exc:\n"
        "        found[name] = f'{type(exc).__name__}: {exc}'\n"
        "print(json.dumps(found))\n"
    )
    found = json.loads(in_venv(installed_runonce, "-c", code))
    venv = installed_runonce.parents[1]
    wrong = {name: where for name, where in found.items() if not Path(where).is_relative_to(venv)}
    assert wrong == {}
    assert sorted(found) == modules


def test_the_venvs_requirements_and_every_extras_hold_together(installed_runonce):
    assert "No broken requirements found." in in_venv(installed_runonce, "-m", "pip", "check")
    code = (
        "import importlib.metadata as metadata, json\n"
        "from packaging.requirements import Requirement\n"
        "unmet = []\n"
        "for line in metadata.requires('runonce'):\n"
        "    requirement = Requirement(line)\n"
        f"    for extra in {sorted(name for name in NEEDS if name)!r}:\n"
        "        if requirement.marker is None or requirement.marker.evaluate({'extra': extra}):\n"
        "            installed = metadata.version(requirement.name)\n"
        "            if installed not in requirement.specifier:\n"
        "                unmet.append(f'{extra}: {line}, installed {installed}')\n"
        "print(json.dumps(unmet))\n"
    )
    assert json.loads(in_venv(installed_runonce, "-c", code)) == []
