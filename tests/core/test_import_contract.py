"""The library's import contract (tests/import_contract.py, run by `make lint`): the layers import
one way, the core no Google library, and no module imports itself through others. Each rule is
shown to catch a deliberate violation in a copy of the library."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.import_contract import LIBRARY, violations

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def library(tmp_path):
    """A copy of functions/runonce to break on purpose."""
    copy = tmp_path / "runonce"
    shutil.copytree(LIBRARY, copy, ignore=shutil.ignore_patterns("__pycache__"))
    return copy


def add_line(path: Path, line: str) -> None:
    path.write_text(path.read_text() + f"\n{line}\n")


def test_the_library_keeps_the_contract():
    assert violations() == []


def test_make_lint_runs_the_check_and_fails_on_a_violation(library):
    add_line(library / "core" / "store.py", "from google.cloud import firestore")
    run = [sys.executable, "-m", "tests.import_contract", str(library)]
    broken = subprocess.run(run, cwd=ROOT, capture_output=True, text=True)
    assert broken.returncode == 1, broken.stdout
    assert "runonce.core.store imports google.cloud" in broken.stdout
    kept = subprocess.run(run[:-1], cwd=ROOT, capture_output=True, text=True)
    assert kept.returncode == 0, kept.stdout
    assert "tests.import_contract" in (ROOT / "Makefile").read_text()


def test_a_core_module_importing_google_breaks_it_even_when_only_for_type_checking(library):
    add_line(library / "core" / "finish.py", "if TYPE_CHECKING:\n    from google.api_core import exceptions")
    assert any("runonce.core.finish imports google.api_core" in problem for problem in violations(library))


@pytest.mark.parametrize(
    "framework", ["werkzeug.wrappers", "flask", "django.http", "starlette.requests", "fastapi"]
)
def test_a_core_module_importing_a_web_framework_breaks_it(library, framework):
    add_line(library / "core" / "finish.py", f"import {framework}")
    assert any(f"runonce.core.finish imports {framework}" in problem for problem in violations(library))


def test_a_core_module_importing_the_valkey_client_breaks_it(library):
    add_line(library / "core" / "store.py", "import valkey")
    assert any("runonce.core.store imports valkey" in problem for problem in violations(library))


def test_a_core_module_loading_google_by_name_breaks_it(library):
    add_line(library / "core" / "run.py", "import importlib")
    add_line(library / "core" / "run.py", 'importlib.import_module("google.cloud.pubsub_v1")')
    problems = violations(library)
    assert any("runonce.core.run imports google.cloud.pubsub_v1" in problem for problem in problems)


@pytest.mark.parametrize("module", [("store", "firestore.py"), ("events", "adapter.py"), ("__init__.py",)])
def test_any_library_module_importing_the_operators_command_breaks_it(library, module):
    add_line(library.joinpath(*module), "from operate.team import resolve")
    assert any(
        "imports operate.team; the library never imports" in problem for problem in violations(library)
    )


def test_the_core_importing_an_adapter_or_the_store_breaks_it(library):
    add_line(library / "core" / "handler.py", "from ..store.firestore import Ledger")
    add_line(library / "core" / "outcomes.py", "from ..events import adapter")
    problems = "\n".join(violations(library))
    assert "runonce.core.handler (layer 1) imports runonce.store.firestore (layer 2)" in problems
    assert "runonce.core.outcomes (layer 1) imports runonce.events.adapter (layer 3)" in problems


def test_an_upward_import_between_adapters_breaks_it(library):
    add_line(library / "store" / "connection.py", "from ..scheduler.keys import run_key")
    assert any(
        "runonce.store.connection (layer 2) imports runonce.scheduler.keys (layer 3)" in problem
        for problem in violations(library)
    )


def test_a_package_importing_the_public_names_breaks_it(library):
    add_line(library / "events" / "parse.py", "from runonce import PermanentError")
    assert any("imports runonce (layer 4)" in problem for problem in violations(library))


def test_an_internal_module_importing_a_third_party_library_breaks_it(library):
    add_line(library / "_text.py", "import werkzeug")
    assert any("runonce._text imports werkzeug" in problem for problem in violations(library))


def test_a_cycle_inside_one_package_breaks_it(library):
    add_line(library / "core" / "run.py", "from .handler import serve")
    assert any(
        problem.startswith("import cycle: runonce.core.handler -> runonce.core.run -> runonce.core.handler")
        or problem.startswith("import cycle: runonce.core.run -> runonce.core.handler -> runonce.core.run")
        for problem in violations(library)
    )


def test_a_package_outside_the_layers_breaks_it(library):
    (library / "extra").mkdir()
    (library / "extra" / "__init__.py").write_text("")
    assert any("runonce.extra is in no layer" in problem for problem in violations(library))


# Runs `code` in a fresh interpreter in which Google's libraries, werkzeug and flask cannot be
# imported, and prints what it brought in beyond runonce and the standard library.
WITHOUT_GOOGLE = """
import json, sys

BLOCKED = ("google", "werkzeug", "flask", "grpc")


class Block:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in BLOCKED:
            raise ImportError(f"{name} is not installed here")


sys.meta_path.insert(0, Block())
before = set(sys.modules)
exec(sys.argv[1])
brought = {name.split(".")[0] for name in set(sys.modules) - before}
print(json.dumps(sorted(brought - {"runonce"} - set(sys.stdlib_module_names))))
"""


def without_google(code: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", WITHOUT_GOOGLE, code],
        cwd=ROOT,
        env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(LIBRARY.parent)},
        capture_output=True,
        text=True,
    )


def test_the_contract_and_the_core_import_without_googles_libraries():
    loaded = without_google("import runonce.contract, runonce.core.store, runonce.core.settings")
    assert (loaded.returncode, loaded.stdout.strip(), loaded.stderr) == (0, "[]", "")


def test_the_public_names_load_the_google_clients_at_their_first_use():
    assert without_google("import runonce").stdout.strip() == "[]"
    used = without_google("from runonce import deduplicated")
    assert used.returncode == 1 and "is not installed here" in used.stderr
