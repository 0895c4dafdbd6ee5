"""The library's import contract, checked by `make lint`: `python -m tests.import_contract [ROOT]`.

The packages of `functions/runonce` form layers, lowest first; a module imports modules of its own
package and of lower layers only, so every arrow points down and the core stays free of adapters:

0. the internals: `runonce.contract` and the private `runonce._*` modules (standard library only);
1. `runonce.core`: imports no Google library (`google.*`), no Valkey client (`valkey`), no web
   framework (werkzeug, Flask, functions-framework, Django, Starlette, FastAPI) and no other
   package of runonce;
2. `runonce.store`, `runonce.targets`, `runonce.hosts` (one module per web framework);
3. `runonce.scheduler`, `runonce.events`, `runonce.downstream`;
4. `runonce` itself (its `__init__`: the public names), which nothing in the library imports.

On top of the layers, no module imports itself through others (no cycles), and no module imports
the operators' command (`operate`), which runs on an operator's machine, never in a function.
Every import counts: at module level, inside a function, under `TYPE_CHECKING`, and
`importlib.import_module("...")` with a literal name. Exits 1 and prints one line per broken rule
(file, line, what, which rule).
"""

from __future__ import annotations

import ast
import sys
from dataclasses import dataclass
from pathlib import Path

LIBRARY = Path(__file__).resolve().parent.parent / "functions" / "runonce"
PACKAGE = "runonce"
INTERNALS = "internals"
LAYERS = {
    INTERNALS: 0,
    "core": 1,
    "store": 2,
    "targets": 2,
    "hosts": 2,
    "scheduler": 3,
    "events": 3,
    "downstream": 3,
}
TOP = 4
WEB_FRAMEWORKS = {"werkzeug", "flask", "functions_framework", "django", "starlette", "fastapi"}
FORBIDDEN_TOP_NAMES = {"core": {"google", "valkey", *WEB_FRAMEWORKS}}
"""Third-party top-level names a layer must not import (the internals import the standard library only)."""
OPERATORS_COMMAND = "operate"
"""The operators' command (operate/): nothing of the library imports it."""


@dataclass(frozen=True)
class Import:
    """One import of one module: where it is written, and the module it names."""

    path: Path
    line: int
    target: str


def modules(root: Path) -> dict[str, Path]:
    """Every module of the library by dotted name (a package by its own name, for its `__init__`)."""
    found = {}
    for path in sorted(root.rglob("*.py")):
        parts = list(path.relative_to(root).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        found[".".join([PACKAGE, *parts])] = path
    return found


def group(module: str) -> str:
    """The package a module belongs to for the layers: `core`, `store`, ..., the internals, or the top."""
    parts = module.split(".")
    if len(parts) == 1:
        return PACKAGE
    if parts[1] == "contract" or parts[1].startswith("_"):
        return INTERNALS
    return parts[1]


def layer(module: str) -> int:
    """The module's layer (0 lowest); a subpackage the table does not know is an error of its own."""
    name = group(module)
    return TOP if name == PACKAGE else LAYERS[name]


def imports(module: str, path: Path, known: dict[str, Path]) -> list[Import]:
    """The modules `module` imports: library modules by their dotted names, others as written."""
    is_package = path.name == "__init__.py"
    here = module.split(".") if is_package else module.split(".")[:-1]
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found += [Import(path, node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = ".".join(here[: len(here) - node.level + 1]) if node.level else ""
            source = ".".join(part for part in (base, node.module or "") if part)
            for alias in node.names:
                child = f"{source}.{alias.name}"
                found.append(Import(path, node.lineno, child if child in known else source))
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "import_module"
            and node.args
            and isinstance(node.args[0], ast.Constant)
            and isinstance(node.args[0].value, str)
        ):
            found.append(Import(path, node.lineno, node.args[0].value))
    return found


def _library_target(target: str, known: dict[str, Path]) -> str | None:
    """The library module an import loads (`runonce.core.store.Claim` is `runonce.core.store`)."""
    parts = target.split(".")
    for length in range(len(parts), 0, -1):
        name = ".".join(parts[:length])
        if name in known:
            return name
    return None


def violations(root: Path = LIBRARY) -> list[str]:
    """Every broken rule of the contract in the library at `root`, one line each."""
    known = modules(root)
    problems = []
    graph: dict[str, set[str]] = {name: set() for name in known}
    for module, path in known.items():
        where = group(module)
        if where != PACKAGE and where not in LAYERS:
            problems.append(f"{path}: {module} is in no layer of the import contract (add it to LAYERS)")
            continue
        for imported in imports(module, path, known):
            spot = f"{imported.path}:{imported.line}"
            target = _library_target(imported.target, known)
            if target is None:
                top_name = imported.target.split(".")[0]
                if where == INTERNALS and top_name not in sys.stdlib_module_names:
                    problems.append(
                        f"{spot}: {module} imports {imported.target}; the internals import the "
                        "standard library only"
                    )
                if top_name == OPERATORS_COMMAND:
                    problems.append(
                        f"{spot}: {module} imports {imported.target}; the library never imports the "
                        "operators' command, which is not in a function's source archive"
                    )
                if top_name in FORBIDDEN_TOP_NAMES.get(where, set()):
                    problems.append(
                        f"{spot}: {module} imports {imported.target}; runonce.{where} imports no "
                        f"{top_name}.* library (it belongs in an adapter, a host or the store)"
                    )
                continue
            if target == module:
                continue
            graph[module].add(target)
            if group(target) != where and layer(target) >= layer(module):
                problems.append(
                    f"{spot}: {module} (layer {layer(module)}) imports {target} (layer {layer(target)}); "
                    "a module imports its own package and lower layers only"
                )
    problems += [f"import cycle: {' -> '.join(cycle)}" for cycle in _cycles(graph)]
    return problems


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """One cycle through each strongly connected group of modules that import each other."""
    cycles: list[list[str]] = []
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def visit(module: str) -> None:
        state[module] = 1
        path.append(module)
        for target in sorted(graph[module]):
            if state.get(target) == 1:
                cycles.append([*path[path.index(target) :], target])
            elif target not in state:
                visit(target)
        path.pop()
        state[module] = 2

    for module in sorted(graph):
        if module not in state:
            visit(module)
    return cycles


def main(argv: list[str]) -> int:
    """Check the library at argv[0] (default functions/runonce); 1 if any rule is broken."""
    root = Path(argv[0]) if argv else LIBRARY
    problems = violations(root)
    for problem in problems:
        print(problem)
    if problems:
        print(f"{len(problems)} import contract violation(s) in {root}")
        return 1
    print(f"import contract kept: {len(modules(root))} modules of {root}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
