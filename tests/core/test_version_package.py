"""functions/pyproject.toml describes the library: its name, its one version, `py.typed`, its
packages and extras, with the pins of requirements.txt. Nothing is built or installed."""

from __future__ import annotations

import re
import tomllib
import warnings
from pathlib import Path

import runonce

ROOT = Path(__file__).resolve().parents[2]
PYPROJECT = ROOT / "functions" / "pyproject.toml"
LIBRARY = ROOT / "functions" / "runonce"
METADATA = tomllib.loads(PYPROJECT.read_text())
PROJECT = METADATA["project"]


def pins(lines: list[str]) -> dict[str, str]:
    """`name==version` requirements by name."""
    found = {}
    for line in lines:
        match = re.fullmatch(r"([A-Za-z0-9._-]+)==(\S+)", line.split("#", 1)[0].strip())
        if match:
            found[match.group(1).lower()] = match.group(2)
    return found


LOCK = pins((ROOT / "requirements.txt").read_text().splitlines())
NEEDS: dict[str | None, set[str]] = {
    None: {"functions-framework", "google-cloud-firestore"},
    "flask": {"flask"},
    "django": {"django"},
    "fastapi": {"fastapi"},
    "events": {"google-cloud-pubsub"},
    "targets": {"requests", "urllib3"},
    "watchdog": {"cronsim"},
    "valkey": {"valkey"},
}
"""What the distribution requires (None) and what each extra adds: a host's framework, or what the
modules of events, targets, the watchdog and the Valkey store import (tests/package checks the
built wheel's)."""


def test_the_distribution_is_runonce_with_its_version_read_from_one_place():
    assert PROJECT["name"] == "runonce" and PROJECT["dynamic"] == ["version"] and "version" not in PROJECT
    assert METADATA["tool"]["setuptools"]["dynamic"]["version"] == {"attr": "runonce._version.__version__"}
    assert re.fullmatch(r"0\.\d+\.\d+", runonce.__version__)


def test_every_pin_of_the_library_equals_the_lock():
    required = PROJECT["dependencies"] + [
        line for extra in PROJECT["optional-dependencies"].values() for line in extra
    ]
    declared = pins(required)
    assert len(declared) == len(required)
    assert declared == {name: LOCK.get(name) for name in declared}


def test_the_extras_bring_each_host_framework_and_what_events_and_targets_import():
    extras = {name: set(pins(lines)) for name, lines in PROJECT["optional-dependencies"].items()}
    assert {None: set(pins(PROJECT["dependencies"])), **extras} == NEEDS


def test_the_packages_found_are_every_package_of_the_library_and_nothing_else():
    from setuptools import find_packages

    find = METADATA["tool"]["setuptools"]["packages"]["find"]
    assert find["where"] == ["."] and find["namespaces"] is False
    found = find_packages(where=str(PYPROJECT.parent), include=find["include"])
    on_disk = {
        ".".join(path.parent.relative_to(LIBRARY.parent).parts) for path in LIBRARY.rglob("__init__.py")
    }
    assert sorted(found) == sorted(on_disk)


def test_the_library_ships_py_typed_and_the_valkey_stores_function_library():
    assert (LIBRARY / "py.typed").is_file() and (LIBRARY / "store" / "valkey.lua").is_file()
    assert METADATA["tool"]["setuptools"]["package-data"] == {"runonce": ["py.typed", "store/valkey.lua"]}


def test_the_build_backend_reads_the_version_runonce_reports():
    import setuptools
    from setuptools.config.pyprojecttoml import read_configuration

    assert METADATA["build-system"]["requires"] == [f"setuptools=={setuptools.__version__}"]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # setuptools 65 calls its [tool.setuptools] table beta
        resolved = read_configuration(PYPROJECT, expand=True)
    assert resolved["project"]["version"] == runonce.__version__
