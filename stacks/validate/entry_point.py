"""Is a job's entry point a deduplicated handler, and does its folder ship what it imports?

Both are read from the function folder's syntax tree (`ast`), without importing it: importing
would run the team's code at synth and need its dependencies installed on the deployer's machine.
A handler the stack deploys but that is not deduplicated runs every delivery; a package missing
from requirements.txt fails only after the build, at the function's first cold start.
"""

from __future__ import annotations

import ast
import re
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cache
from pathlib import Path

RUNONCE = "runonce"
"""The bundled package: the stack zips it into every function folder."""

# Import names whose distribution is not the import name with '_' for '-'.
DISTRIBUTIONS = {
    "functions_framework": "functions-framework",
    "google.api_core": "google-api-core",
    "google.auth": "google-auth",
    "google.oauth2": "google-auth",
    "google.protobuf": "protobuf",
    "google.cloud.secretmanager": "google-cloud-secret-manager",
    "google.cloud.pubsub_v1": "google-cloud-pubsub",
    "googleapiclient": "google-api-python-client",
    "yaml": "pyyaml",
    "PIL": "pillow",
    "dateutil": "python-dateutil",
    "dotenv": "python-dotenv",
    "bs4": "beautifulsoup4",
    "sklearn": "scikit-learn",
    "cv2": "opencv-python",
    "jwt": "pyjwt",
    "attr": "attrs",
}
# Distributions that a listed one documents as its own dependency, so they arrive with it.
ARRIVES_WITH = {
    "flask": "functions-framework",
    "werkzeug": "functions-framework",
    "cloudevents": "functions-framework",
    "google-api-core": "google-cloud-",
    "google-auth": "google-cloud-",
    "protobuf": "google-cloud-",
    "proto-plus": "google-cloud-",
    "grpcio": "google-cloud-",
}


@dataclass(frozen=True)
class HandlerIssue:
    """Why the entry point is not a deduplicated handler, and how to fix it."""

    message: str
    """What is wrong, and why it matters."""
    fix: str
    """What to change."""


SCHEDULED = "deduplicated"
"""The decorator of a scheduled job's handler."""
EVENT = "deduplicated_event"
"""The decorator of an event job's handler (Pub/Sub push)."""


def handler_issue(main_py: Path, entry_point: str, decorator: str = SCHEDULED) -> HandlerIssue | None:
    """What is wrong with `entry_point` in this main.py, or None if it is a deduplicated handler.
    `decorator` is `SCHEDULED` for a scheduled job, `EVENT` for an event job (the same forms with
    `deduplicated_event`).

    Accepted: a top-level `def` decorated with `@deduplicated` or `@deduplicated(...)` (also as
    `runonce.deduplicated`), or `name = deduplicated(job)` / `deduplicated(...)(job)`, possibly
    wrapped further (`functions_framework.http(deduplicated(job))`); the job may be any callable
    expression (`deduplicated(Proxy())`). The job must not be async:
    functions-framework and `deduplicated` call it synchronously, so a coroutine would never run.
    """
    where = f"{main_py.parent.name}/main.py"
    try:
        tree = ast.parse(main_py.read_text(), filename=str(main_py))
    except SyntaxError as error:
        return HandlerIssue(
            f"functions/{where} does not parse (line {error.lineno}: {error.msg})", "fix the syntax error"
        )
    names = _DedupNames(tree, decorator)
    functions: dict[str, ast.FunctionDef | ast.AsyncFunctionDef] = {}
    binding: ast.stmt | None = None
    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            functions[node.name] = node
        if entry_point in _bound_names(node):
            binding = node
    if binding is None:
        return HandlerIssue(
            f"functions/{where} defines no {entry_point!r}",
            "set entry_point to the name of the @deduplicated handler in that file",
        )
    if isinstance(binding, ast.FunctionDef | ast.AsyncFunctionDef):
        if not any(names.is_dedup(decorator) for decorator in binding.decorator_list):
            return _not_deduplicated(where, entry_point, decorator)
        return _async_issue(where, binding)
    wrapped = [job for job in map(names.wrapped_job, ast.walk(binding)) if job is not None]
    if not wrapped:
        return _not_deduplicated(where, entry_point, decorator)
    job = functions.get(wrapped[0])
    return _async_issue(where, job) if job is not None else None


def missing_requirements(folder: Path, runonce_dir: Path) -> list[tuple[str, str]]:
    """(import, distribution) for every third-party import of the folder's main.py, and of the
    bundled runonce package, that its requirements.txt does not list (nor brings along)."""
    local = {path.stem for path in folder.iterdir()} | {RUNONCE}
    own = list(_imports(folder / "main.py"))
    imports = [name for name in own if name.split(".")[0] not in local]
    for path in sorted(_runonce_modules(own, runonce_dir)):
        imports += _imports(path)
    listed = _requirements(folder / "requirements.txt")
    missing: dict[str, str] = {}
    for name in imports:
        if name.split(".")[0] in sys.stdlib_module_names:
            continue
        distribution = _distribution(name)
        if distribution not in listed and not _arrives_with(distribution, listed):
            missing.setdefault(distribution, name)
    return [(name, distribution) for distribution, name in missing.items()]


class _DedupNames:
    """The names under which a module can refer to runonce's `deduplicated` (or another of its
    decorators, `decorator`)."""

    def __init__(self, tree: ast.Module, decorator: str = SCHEDULED) -> None:
        self.decorator = decorator
        self.functions = {decorator}
        self.modules = {RUNONCE}
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module == RUNONCE:
                self.functions |= {a.asname or a.name for a in node.names if a.name == decorator}
            elif isinstance(node, ast.Import):
                self.modules |= {a.asname or a.name for a in node.names if a.name == RUNONCE}

    def is_dedup(self, node: ast.expr) -> bool:
        """`deduplicated`, `runonce.deduplicated`, or either called with options."""
        if isinstance(node, ast.Call):
            node = node.func
        if isinstance(node, ast.Name):
            return node.id in self.functions
        return (
            isinstance(node, ast.Attribute)
            and node.attr == self.decorator
            and isinstance(node.value, ast.Name)
            and node.value.id in self.modules
        )

    def wrapped_job(self, node: ast.AST) -> str | None:
        """The job's name in `deduplicated(job)` or `deduplicated(...)(job)`; "" when the job is
        another expression (a callable object, as the proxy's `deduplicated(Proxy())`); else None."""
        if not isinstance(node, ast.Call) or not node.args:
            return None
        direct = isinstance(node.func, ast.Name | ast.Attribute) and self.is_dedup(node.func)
        configured = isinstance(node.func, ast.Call) and self.is_dedup(node.func)
        if not (direct or configured):
            return None
        return node.args[0].id if isinstance(node.args[0], ast.Name) else ""


def _bound_names(node: ast.stmt) -> set[str]:
    """Names a top-level statement binds (def, assignment, import)."""
    if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
        return {node.name}
    if isinstance(node, ast.Assign):
        return {target.id for target in node.targets if isinstance(target, ast.Name)}
    if isinstance(node, ast.AnnAssign | ast.AugAssign) and isinstance(node.target, ast.Name):
        return {node.target.id}
    if isinstance(node, ast.Import | ast.ImportFrom):
        return {(alias.asname or alias.name).split(".")[0] for alias in node.names}
    return set()


def _not_deduplicated(where: str, entry_point: str, decorator: str) -> HandlerIssue:
    return HandlerIssue(
        f"{entry_point!r} in functions/{where} is not wrapped by runonce's {decorator}, so every "
        "delivery (retries and duplicates included) would run the job",
        f"decorate it with @{decorator} (under @functions_framework.http), or write "
        f"`{entry_point} = {decorator}(job)`",
    )


def lists_distribution(folder: Path, distribution: str) -> bool:
    """Whether the folder's requirements.txt lists this distribution (or a file it includes does)."""
    return _normalize(distribution) in _requirements(folder / "requirements.txt")


def _async_issue(where: str, job: ast.FunctionDef | ast.AsyncFunctionDef) -> HandlerIssue | None:
    if isinstance(job, ast.AsyncFunctionDef):
        return HandlerIssue(
            f"{job.name!r} in functions/{where} is `async def`: functions-framework and deduplicated "
            "call it synchronously, so the coroutine would be created and never run",
            "make it a plain `def` (run asyncio code inside it with asyncio.run)",
        )
    return None


def _runonce_modules(imports: list[str], runonce_dir: Path) -> set[Path]:
    """The bundled runonce files a handler loads: the package's `__init__`, the modules main.py
    names (with the packages above them), and every module those import in turn (`from .x import
    y`, `from ..core.store import Claim`). A module nothing loads (e.g. the proxy, with its
    `requests`) adds no requirement to other functions."""
    wanted = [runonce_dir / "__init__.py"] + [
        path
        for name in imports
        if name.split(".")[0] == RUNONCE
        for path in _module_files(runonce_dir, name.split(".")[1:])
    ]
    seen: set[Path] = set()
    while wanted:
        path = wanted.pop()
        if path in seen or not path.is_file():
            continue
        seen.add(path)
        wanted += _relative_imports(path)
    return seen


def _module_files(folder: Path, parts: list[str]) -> list[Path]:
    """The files that importing `parts` below `folder` loads: each package's `__init__` on the way,
    then the module; a part that is neither (a class, a function) ends the walk, after the module
    its package loads for that name at first use (`runonce.deduplicated`)."""
    files = []
    for part in parts:
        if (folder / part / "__init__.py").is_file():
            folder = folder / part
            files.append(folder / "__init__.py")
        else:
            if (folder / f"{part}.py").is_file():
                files.append(folder / f"{part}.py")
            else:
                files += _loaded_at_first_use(folder / "__init__.py", part)
            break
    return files


def _loaded_at_first_use(init: Path, name: str) -> list[Path]:
    """The module a package's `__getattr__` loads for `name`: a package that loads a name at first
    use declares it to type checkers by a relative import under `if TYPE_CHECKING:`, and a handler
    that imports the name loads that module when it uses it."""
    try:
        tree = ast.parse(init.read_text())
    except (SyntaxError, OSError):
        return []
    blocks = [node for node in tree.body if isinstance(node, ast.If) and _is_type_checking(node.test)]
    for node in (each for block in blocks for statement in block.body for each in ast.walk(statement)):
        if isinstance(node, ast.ImportFrom) and node.level:
            for alias in node.names:
                if (alias.asname or alias.name) == name:
                    return _relative_target(init, node, alias.name)
    return []


def _relative_imports(path: Path) -> Iterator[Path]:
    """The package files a module imports relatively (`from .x import y`, `from .. import x`)."""
    for node in _scan(path).relative:
        for alias in node.names:
            yield from _relative_target(path, node, alias.name)


def _relative_target(path: Path, node: ast.ImportFrom, name: str) -> list[Path]:
    """The files `from .module import name`, written in `path`, loads."""
    base = path.parent
    for _ in range(node.level - 1):
        base = base.parent
    return _module_files(base, [*(node.module.split(".") if node.module else []), name])


def _runtime_statements(tree: ast.Module) -> Iterator[ast.stmt]:
    """Every statement of the module that can run, in source order: the body of
    `if TYPE_CHECKING:` (or `if typing.TYPE_CHECKING:`) is left out, since only a type checker
    reads it and its imports need no pin; its `else:` branch runs and is kept. So is the body of a
    `try` that catches ImportError (an optional import, `_catches_import_error`). Imports are
    statements, so only the statement blocks are walked (bodies, `except` handlers, `case`s),
    not the expressions."""
    pending: list[ast.AST] = list(reversed(tree.body))
    while pending:
        node = pending.pop()
        if isinstance(node, ast.stmt):
            yield node
        if isinstance(node, ast.If) and _is_type_checking(node.test):
            blocks: list[ast.AST] = list(node.orelse)
        elif isinstance(node, ast.Try) and _catches_import_error(node):
            # An optional import: its module answers a clear error when it is missing (the Valkey
            # store's client, loaded only when RUNONCE_STORE chooses it); the stack adds what a
            # team's choice needs (`store_requirements`), so a folder need not list it.
            blocks = [*node.handlers, *node.orelse, *node.finalbody]
        else:
            blocks = [
                child
                for name in node._fields
                if isinstance(value := getattr(node, name, None), list)
                for child in value
                if isinstance(child, ast.stmt | ast.excepthandler | ast.match_case)
            ]
        pending.extend(reversed(blocks))


def _catches_import_error(node: ast.Try) -> bool:
    """Whether a handler of this `try` catches ImportError (or ModuleNotFoundError) by name."""
    names = {"ImportError", "ModuleNotFoundError"}
    for handler in node.handlers:
        caught = handler.type.elts if isinstance(handler.type, ast.Tuple) else [handler.type]
        if any(isinstance(kind, ast.Name) and kind.id in names for kind in caught):
            return True
    return False


def _is_type_checking(test: ast.expr) -> bool:
    if isinstance(test, ast.Name):
        return test.id == "TYPE_CHECKING"
    return isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"


def _imports(path: Path) -> Iterator[str]:
    """Dotted names of the absolute imports in a file (`from google.cloud import firestore`
    gives google.cloud.firestore); nothing if the file does not parse (reported elsewhere)."""
    yield from _scan(path).absolute


@dataclass(frozen=True)
class _Imports:
    """A module's imports that run, in source order."""

    absolute: tuple[str, ...] = ()
    """Dotted names of its absolute imports."""
    relative: tuple[ast.ImportFrom, ...] = ()
    """Its relative `from` imports."""


def _scan(path: Path) -> _Imports:
    """The imports of a file; none if it cannot be read or does not parse."""
    try:
        return _scan_source(path.read_text())
    except (SyntaxError, OSError):
        return _Imports()


@cache
def _scan_source(source: str) -> _Imports:
    """Every function folder loads the same bundled runonce modules: each is parsed once per
    process (keyed by its text, so an edited file is parsed again)."""
    absolute: list[str] = []
    relative: list[ast.ImportFrom] = []
    for node in _runtime_statements(ast.parse(source)):
        if isinstance(node, ast.Import):
            absolute += (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                relative.append(node)
            elif node.module:
                absolute += (f"{node.module}.{alias.name}" for alias in node.names)
    return _Imports(tuple(absolute), tuple(relative))


def _distribution(name: str) -> str:
    """The PyPI distribution an import most likely comes from, normalized (PEP 503)."""
    parts = name.split(".")
    for length in range(len(parts), 0, -1):
        prefix = ".".join(parts[:length])
        if prefix in DISTRIBUTIONS:
            return DISTRIBUTIONS[prefix]
    if parts[:2] == ["google", "cloud"] and len(parts) > 2:
        return _normalize("google-cloud-" + re.sub(r"_v\d+\w*$", "", parts[2]))
    return _normalize(parts[0])


def _requirements(path: Path) -> set[str]:
    """Normalized distribution names a requirements file lists (following `-r other.txt`)."""
    names: set[str] = set()
    for line in path.read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if line.startswith(("-r ", "--requirement ")):
            nested = path.parent / line.split(maxsplit=1)[1]
            names |= _requirements(nested) if nested.is_file() else set()
        elif match := re.match(r"^([A-Za-z0-9][A-Za-z0-9._-]*)", line):
            names.add(_normalize(match.group(1)))
    return names


def _arrives_with(distribution: str, listed: set[str]) -> bool:
    carrier = ARRIVES_WITH.get(distribution)
    return carrier is not None and any(name.startswith(carrier) for name in listed)


def _normalize(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()
