"""The stacks synthesize the same Terraform JSON on CDKTF and on CDK Terrain (docs/stacks/toolchain.md).

Every team of teams/ and the every-feature fixture are synthesized twice, in two processes: with
this venv's CDKTF, and with .venv/cdktn's CDK Terrain (`RUNONCE_TOOLCHAIN=cdktn`, jsii on the Node
22 of toolchains/cdktn), as `make synth TOOLCHAIN=cdktn` runs it. Each stack's `cdk.tf.json` must be
equal as JSON (key order aside) once the two differences named in `KNOWN_DIFFERENCES` are set
aside, and those two must be the only ones. The teams are synthesized without validation: it is
plain data that imports neither toolchain (tests/stacks/test_validation.py covers it).
"""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from stacks import toolchain
from stacks.config.team import REPO_ROOT, TEAMS_DIR, load_team_file, team_file_paths

EVERY_FEATURE = Path(__file__).parent / "fixtures" / "every_feature.py"
TEAM_FILES = [*team_file_paths(TEAMS_DIR), EVERY_FEATURE]
STACKS = [load_team_file(path).name for path in TEAM_FILES]

CDKTN_PYTHON = REPO_ROOT / ".venv" / "cdktn" / "bin" / "python"
CDKTN_NODE = REPO_ROOT / "toolchains" / "cdktn" / "node_modules" / ".bin" / "node"
needs_cdktn = pytest.mark.skipif(
    not (CDKTN_PYTHON.exists() and CDKTN_NODE.exists()),
    reason=f"CDK Terrain is not installed ({CDKTN_PYTHON}, {CDKTN_NODE}): `make test` installs it",
)

SYNTH = """
import sys
from pathlib import Path
from stacks.team import load_team_file
from stacks.team_stack import TeamStack
from stacks.toolchain import App, TOOLCHAIN
out, expected, *files = sys.argv[1:]
if TOOLCHAIN.name != expected:
    sys.exit(f"synthesizing with {TOOLCHAIN.name}, not {expected}")
app = App(outdir=out)
for path in files:
    TeamStack(app, load_team_file(Path(path)))
app.synth()
"""
"""The synthesis part of main.py (the teams loaded one by one, without validation)."""

KNOWN_DIFFERENCES = {
    ("//", "metadata", "version"): ("0.21.0", "0.22.1"),
    ("terraform", "required_providers", "google", "source"): ("google", "hashicorp/google"),
}
"""Where the raw JSON differs, CDKTF's value then CDK Terrain's. The version is a `//` comment
Terraform ignores. `google` is Terraform's short form of `hashicorp/google`, the same provider address
(CDK Terrain writes the full form), so `terraform init` installs the same provider and the state
matches it."""


def _synthesize(toolchain_name: str, python: Path, out: Path) -> None:
    env = {**os.environ, toolchain.TOOLCHAIN_ENV: toolchain_name, "CDKTF_OUTDIR": str(out)}
    if toolchain_name == "cdktn":
        env["JSII_NODE"] = str(CDKTN_NODE)
    result = subprocess.run(
        [str(python), "-O", "-c", SYNTH, str(out), toolchain_name, *map(str, TEAM_FILES)],
        cwd=REPO_ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode == 0, f"{toolchain_name} synth failed:\n{result.stderr[-4000:]}"


@pytest.fixture(scope="module")
def outputs(tmp_path_factory) -> dict[str, Path]:
    """Both toolchains' cdktf.out folders, synthesized side by side."""
    folders = {name: tmp_path_factory.mktemp(f"{name}.out") for name in ("cdktf", "cdktn")}
    pythons = {"cdktf": Path(sys.executable), "cdktn": CDKTN_PYTHON}
    with ThreadPoolExecutor(2) as pool:
        for done in [pool.submit(_synthesize, name, pythons[name], folders[name]) for name in folders]:
            done.result()
    return folders


def _stack(folder: Path, stack: str) -> dict[str, Any]:
    return json.loads((folder / "stacks" / stack / "cdk.tf.json").read_text())


def differences(left: Any, right: Any, path: tuple[str, ...] = ()) -> dict[tuple[str, ...], tuple[Any, Any]]:
    """Every place two JSON values differ, by path (dict key order ignored, list order kept)."""
    if isinstance(left, dict) and isinstance(right, dict):
        found: dict[tuple[str, ...], tuple[Any, Any]] = {}
        for key in sorted(left.keys() | right.keys()):
            found.update(differences(left.get(key, "<absent>"), right.get(key, "<absent>"), (*path, key)))
        return found
    if isinstance(left, list) and isinstance(right, list) and len(left) == len(right):
        found = {}
        for index, (one, other) in enumerate(zip(left, right, strict=True)):
            found.update(differences(one, other, (*path, str(index))))
        return found
    return {} if left == right else {path: (left, right)}


def test_differences_finds_changed_missing_and_reordered_values_but_not_key_order():
    assert differences({"a": 1, "b": [1, 2]}, {"b": [1, 2], "a": 1}) == {}
    assert differences({"a": {"b": 1}}, {"a": {"b": 2}}) == {("a", "b"): (1, 2)}
    assert differences({"a": 1}, {}) == {("a",): (1, "<absent>")}
    assert differences({"l": [1, 2]}, {"l": [2, 1]}) == {("l", "0"): (1, 2), ("l", "1"): (2, 1)}


@needs_cdktn
def test_both_toolchains_synthesize_every_team_and_the_every_feature_stack(outputs):
    for folder in outputs.values():
        assert sorted(path.name for path in (folder / "stacks").iterdir()) == sorted(STACKS)


@needs_cdktn
@pytest.mark.parametrize("stack", STACKS)
def test_a_stack_is_the_same_terraform_json_on_both_toolchains_but_for_the_named_differences(outputs, stack):
    found = differences(_stack(outputs["cdktf"], stack), _stack(outputs["cdktn"], stack))
    assert found == KNOWN_DIFFERENCES


@needs_cdktn
@pytest.mark.parametrize("stack", STACKS)
def test_a_stack_has_the_same_source_archives_byte_for_byte_on_both_toolchains(outputs, stack):
    def assets(folder: Path) -> dict[str, bytes]:
        root = folder / "stacks" / stack
        return {str(path.relative_to(root)): path.read_bytes() for path in root.rglob("*.zip")}

    cdktf_assets = assets(outputs["cdktf"])
    assert cdktf_assets
    assert cdktf_assets == assets(outputs["cdktn"])


def _make_dry_run(*arguments: str) -> subprocess.CompletedProcess[str]:
    env = {name: value for name, value in os.environ.items() if name != "TOOLCHAIN"}
    return subprocess.run(
        ["make", "--no-print-directory", "-n", *arguments],
        cwd=REPO_ROOT,
        env=env,
        capture_output=True,
        text=True,
    )


def test_make_synth_runs_the_cdktf_cli_by_default_and_the_app_on_cdk_terrain_with_toolchain_cdktn():
    assert _make_dry_run("synth").stdout.splitlines()[-1] == "npx --no-install cdktf synth"
    assert _make_dry_run("synth", "TOOLCHAIN=cdktn").stdout.splitlines()[-1] == (
        f"RUNONCE_TOOLCHAIN=cdktn JSII_NODE={CDKTN_NODE} .venv/cdktn/bin/python -O main.py"
    )


def test_make_refuses_an_unknown_toolchain_naming_the_choices():
    result = _make_dry_run("synth", "TOOLCHAIN=terraform")
    assert result.returncode != 0
    assert "TOOLCHAIN=terraform is not a toolchain: use TOOLCHAIN=cdktf (the default) or TOOLCHAIN=cdktn" in (
        result.stderr
    )


def test_the_toolchain_is_cdktf_unless_the_variable_names_cdk_terrain():
    assert toolchain.chosen({}).core == "cdktf"
    assert toolchain.chosen({toolchain.TOOLCHAIN_ENV: ""}).core == "cdktf"
    assert toolchain.chosen({toolchain.TOOLCHAIN_ENV: "cdktn"}) == toolchain.Toolchain(
        "cdktn", "cdktn", "cdktn_provider_google", "cdktn_provider_time", "make synth TOOLCHAIN=cdktn"
    )


def test_an_unknown_toolchain_is_refused_naming_the_variable_and_the_choices():
    with pytest.raises(
        ValueError, match=r"RUNONCE_TOOLCHAIN='cdk' is not a toolchain: set it to one of cdktf, cdktn"
    ):
        toolchain.chosen({toolchain.TOOLCHAIN_ENV: "cdk"})


def test_a_toolchain_that_is_not_installed_is_named_with_the_command_that_installs_it():
    script = "from stacks.toolchain import App"
    env = {**os.environ, toolchain.TOOLCHAIN_ENV: "cdktn"}
    result = subprocess.run(
        [sys.executable, "-c", script], cwd=REPO_ROOT, env=env, capture_output=True, text=True
    )
    assert result.returncode != 0
    assert (
        "cdktn is not installed in this Python (RUNONCE_TOOLCHAIN=cdktn): run `make synth TOOLCHAIN=cdktn`"
        in (result.stderr)
    )


TOOLCHAIN_PACKAGES = ("cdktf", "cdktn")
PROVIDER_PACKAGES = ("cdktf_cdktf_provider_", "cdktn_provider_")


def _runtime_toolchain_imports(path: Path, root: Path = REPO_ROOT) -> list[str]:
    """`file:line module` for each import of a toolchain package outside `if TYPE_CHECKING:`."""
    tree = ast.parse(path.read_text())
    typing_only = {
        id(node)
        for branch in ast.walk(tree)
        if isinstance(branch, ast.If)
        and isinstance(branch.test, ast.Name)
        and branch.test.id == "TYPE_CHECKING"
        for statement in branch.body
        for node in ast.walk(statement)
    }
    found = []
    for node in ast.walk(tree):
        if id(node) in typing_only:
            continue
        if isinstance(node, ast.ImportFrom) and node.level == 0:
            modules = [node.module or ""]
        elif isinstance(node, ast.Import):
            modules = [alias.name for alias in node.names]
        else:
            continue
        for module in modules:
            package = module.split(".")[0]
            if package in TOOLCHAIN_PACKAGES or package.startswith(PROVIDER_PACKAGES):
                found.append(f"{path.relative_to(root)}:{node.lineno} {module}")
    return found


def test_only_the_seam_imports_a_toolchain_package_at_run_time():
    sources = [REPO_ROOT / "main.py", *sorted((REPO_ROOT / "stacks").rglob("*.py"))]
    assert [line for path in sources for line in _runtime_toolchain_imports(path)] == []


def test_the_seam_check_finds_a_runtime_import_and_passes_a_typing_only_one(tmp_path):
    probe = tmp_path / "probe.py"
    probe.write_text(
        "from typing import TYPE_CHECKING\nfrom cdktf import App\nimport cdktn_provider_google.x\n"
        "import cdktf_helpers\nif TYPE_CHECKING:\n    from cdktf_cdktf_provider_google.y import Y\n"
    )
    assert _runtime_toolchain_imports(probe, tmp_path) == [
        "probe.py:2 cdktf",
        "probe.py:3 cdktn_provider_google.x",
    ]


def test_the_provider_classes_loaded_by_name_are_the_ones_typed_for_mypy():
    from stacks.constructs import provider

    tree = ast.parse(Path(provider.__file__).read_text())
    typed: dict[str, str] = {}
    for branch in tree.body:
        if (
            isinstance(branch, ast.If)
            and isinstance(branch.test, ast.Name)
            and branch.test.id == "TYPE_CHECKING"
        ):
            for node in branch.body:
                assert isinstance(node, ast.ImportFrom) and node.module
                family, submodule = node.module.split(".", 1)
                package = provider.PACKAGE if family.endswith("google") else provider.TIME_PACKAGE
                typed.update({alias.name: f"{package}.{submodule}" for alias in node.names})
    loaded = {name: module for module, names in provider.LOADED_NOW.items() for name in names}
    assert {**loaded, **provider.AT_FIRST_USE} == typed
    assert not loaded.keys() & provider.AT_FIRST_USE.keys()
    assert sorted(typed) == sorted(provider.__all__)
    for name, module in loaded.items():
        assert getattr(provider, name).__module__ == module
