"""The runonce wheel, built from functions/ and installed into a fresh venv, offline.

Used by the demo's services (localscheduler/demos/services.py) and by the tests: the session
fixture `installed_runonce` (tests/package/wheel.py, registered for every test in tests/conftest.py)
is the python of a venv holding runonce as a user gets it: built from a copy of functions/pyproject.toml
and functions/runonce, installed from the wheel, never from the source tree. A test that must run
a host (gunicorn, uvicorn, functions-framework) on the installed library starts it with that
python and `installed_environment()`:

    subprocess.run([installed_runonce, "-m", "gunicorn", ...], env=installed_environment(), cwd=tmp)

The environment drops PYTHONPATH (the Makefile's points at the source tree); the working directory
must not be functions/ either (`python -m` puts it first on sys.path).

Offline by construction, no network in any step:
- The build runs setuptools' own `egg_info` and `build_py` (the venv's setuptools, the one
  functions/pyproject.toml pins) and writes the wheel's zip itself: setuptools 65.5 leaves
  `bdist_wheel` to the `wheel` package, which the shared venv does not hold. The wheel's
  files are exactly what build_py collects from the packages and package data pyproject.toml
  declares, and its METADATA is setuptools' PKG-INFO with the Requires-Dist lines setuptools
  wrote to requires.txt, one per requirement, as the wheel format (PEP 427, core metadata 2.1)
  spells them.
- The venv is created without pip and the wheel installed with `--no-index --no-deps` (by the
  shared venv's pip, seen through the .pth below). The dependencies are the shared venv's: a
  `.pth` file in the new venv runs `site.addsitedir(<shared site-packages>)`, which appends that
  directory after the venv's own and processes its .pth files too (functions-framework's
  namespace packages need that).
  `--system-site-packages` would not do: from a venv's interpreter it exposes the base
  interpreter's site-packages, not the venv's. The shared venv holds no `runonce`, so the only
  runonce the new venv can import is the installed one.

Each session builds once into its own temporary directory from a fresh copy of the sources, so
nothing depends on file times or on an earlier build.
"""

from __future__ import annotations

import email.parser
import os
import shutil
import subprocess
import sys
import sysconfig
import venv
import zipfile
from base64 import urlsafe_b64encode
from hashlib import sha256
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
FUNCTIONS = ROOT / "functions"
LIBRARY = FUNCTIONS / "runonce"
SHARED_SITE_PACKAGES = Path(sysconfig.get_paths()["purelib"])
WHEEL_FILE = (
    "Wheel-Version: 1.0\nGenerator: localscheduler/hosts/wheel.py\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
)


class BuildError(RuntimeError):
    """A step of the build or the install failed; the message holds its output."""


def installed_environment() -> dict[str, str]:
    """This process's environment without PYTHONPATH: what a process of the installed venv gets."""
    return {name: value for name, value in os.environ.items() if name != "PYTHONPATH"}


def _run(command: list[str], cwd: Path) -> str:
    done = subprocess.run(
        command, cwd=cwd, env=installed_environment(), capture_output=True, text=True, check=False
    )
    if done.returncode != 0:
        raise BuildError(f"{' '.join(command)} exited {done.returncode}:\n{done.stdout}{done.stderr}")
    return done.stdout


def library_files(top: Path) -> set[str]:
    """The files of a runonce tree, relative to its parent, without byte code."""
    return {
        path.relative_to(top.parent).as_posix()
        for path in top.rglob("*")
        if path.is_file() and "__pycache__" not in path.parts and path.suffix != ".pyc"
    }


def requires_dist(requires_txt: str) -> list[str]:
    """setuptools' requires.txt as Requires-Dist values: the lines before any section are the
    distribution's own; a `[name]` section holds extra `name`'s."""
    values, extra = [], None
    for line in filter(None, (raw.strip() for raw in requires_txt.splitlines())):
        if line.startswith("["):
            extra = line.strip("[]")
            if ":" in extra:
                raise BuildError(f"requires.txt section {line}: environment markers are not supported here")
        else:
            values.append(f'{line}; extra == "{extra}"' if extra else line)
    return values


def build_wheel(work: Path) -> Path:
    """Build the runonce wheel from a copy of functions/ into `work`; return its path."""
    source, egg, lib, dist = (work / name for name in ("source", "egg", "lib", "dist"))
    for folder in (egg, lib, dist):
        folder.mkdir(parents=True)
    shutil.copytree(LIBRARY, source / "runonce", ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    shutil.copy2(FUNCTIONS / "pyproject.toml", source / "pyproject.toml")
    setup = [sys.executable, "-W", "ignore", "-c", "from setuptools import setup; setup()", "-q"]
    _run([*setup, "egg_info", "--egg-base", str(egg), "build_py", "--build-lib", str(lib)], cwd=source)
    (egg_info,) = egg.glob("*.egg-info")
    metadata = email.parser.Parser().parsestr((egg_info / "PKG-INFO").read_text())
    for value in requires_dist((egg_info / "requires.txt").read_text()):
        metadata["Requires-Dist"] = value
    name, version = metadata["Name"], metadata["Version"]
    info = f"{name}-{version}.dist-info"
    files = (path for path in lib.rglob("*") if path.is_file())
    contents = {path.relative_to(lib).as_posix(): path.read_bytes() for path in files}
    contents[f"{info}/METADATA"] = metadata.as_string().encode()
    contents[f"{info}/WHEEL"] = WHEEL_FILE.encode()
    contents[f"{info}/top_level.txt"] = (egg_info / "top_level.txt").read_bytes()
    record = [
        f"{path},sha256={urlsafe_b64encode(sha256(data).digest()).rstrip(b'=').decode()},{len(data)}"
        for path, data in sorted(contents.items())
    ]
    contents[f"{info}/RECORD"] = ("\n".join([*record, f"{info}/RECORD,,"]) + "\n").encode()
    wheel = dist / f"{name}-{version}-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w", zipfile.ZIP_DEFLATED) as archive:
        for path, data in contents.items():
            archive.writestr(path, data)
    return wheel


def install(wheel: Path, target: Path) -> Path:
    """A fresh venv at `target` with `wheel` installed and the shared venv's packages visible
    (see the module docstring); return its python."""
    venv.EnvBuilder(with_pip=False).create(target)
    python = str(target / "bin" / "python")
    where = _run(
        [python, "-I", "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"], cwd=target
    )
    shared = f"import site; site.addsitedir({str(SHARED_SITE_PACKAGES)!r})\n"
    (Path(where.strip()) / "shared_venv.pth").write_text(shared)
    pip_install = [python, "-I", "-m", "pip", "install", "--quiet", "--no-index", "--no-deps", "--no-compile"]
    _run([*pip_install, str(wheel)], cwd=target)
    return Path(python)
