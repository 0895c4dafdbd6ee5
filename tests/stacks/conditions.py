"""Every precondition, postcondition and check assertion of a synthesized stack, evaluated by the
installed Terraform offline (docs/stacks/validation.md, "Conditions, evaluated by Terraform").

The google provider cannot be loaded here, so its objects are stood in for: each trial is one
owner of conditions (a resource, a data source or a check block) read back with one set of
attributes, the ones a case says the API returns. The owner becomes a `terraform_data` whose
`input` holds those attributes and whose `lifecycle` holds the owner's conditions, `self.X`
rewritten to `self.input.X`; every object the conditions name (`data.google_project.project`)
becomes a `terraform_data` of its own, with the attributes the case gives it; a check block stays
a check block over them. `terraform plan` then evaluates every condition with Terraform's own
functions and types, and reports each failure as a user sees it: its summary ("Resource
postcondition failed") and its detail, the rendered `error_message`.

Modelled, not verified: the attributes (each case names its source: the provider's schema and
read, Google's API reference), and when a condition runs (a data source that waits for a resource
still to be created is read during apply; its postcondition then stops the apply, with the same
message).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

TERRAFORM = shutil.which("terraform")
ENV_KEYS = ("PATH", "HOME", "TF_CLI_CONFIG_FILE", "TMPDIR")
RULES = ("precondition", "postcondition")
# The root of a traversal in Terraform's expression language: self, a data source, a resource, a
# local or a variable (names may hold dashes, as cdktf's ids do).
ROOT = re.compile(
    r"(?<![\w.-])(self|data\.[a-z0-9_]+\.[A-Za-z0-9_-]+|[a-z][a-z0-9]*_[a-z0-9_]+\.[A-Za-z0-9_-]+"
    r"|local\.[A-Za-z0-9_-]+|var\.[A-Za-z0-9_-]+)(?![\w(-])"
)
CONTEXT = re.compile(
    r"^(?:resource\.terraform_data\.(t\d+)\.lifecycle\.(precondition|postcondition)|check\.(t\d+)\.(assert))\[(\d+)\]$"
)


@dataclass(frozen=True)
class Condition:
    """One condition of a synthesized stack, as Terraform would evaluate it."""

    rule: str
    """"precondition" or "postcondition" (a resource's or a data source's lifecycle), or "assert"
    (a check block's)."""
    index: int
    """Its position among the owner's conditions of that rule."""
    condition: str
    error_message: str


@dataclass(frozen=True)
class Owner:
    """A resource, data source or check block with conditions, in one synthesized stack."""

    stack: str
    address: str
    """`data.TYPE.NAME`, `TYPE.NAME` or `check.NAME`."""
    config: Mapping[str, Any]
    """Its arguments as synthesized (a check block's: its scoped data source's, if any)."""
    conditions: tuple[Condition, ...]

    @property
    def kind(self) -> str:
        """`data.TYPE`, `TYPE` or `check`."""
        return self.address.rsplit(".", 1)[0]

    def references(self) -> set[str]:
        """The objects its conditions and messages name (`data.TYPE.NAME`, `TYPE.NAME`,
        `local.NAME`, `var.NAME`), besides `self`."""
        found = set()
        for condition in self.conditions:
            for text in (condition.condition, condition.error_message):
                found |= {root for root in _roots(text) if root != "self"}
        return found


def owners(stack: str, document: Mapping[str, Any]) -> list[Owner]:
    """Every owner of conditions in a synthesized stack, in the JSON's order."""
    found = []
    for section, prefix in (("resource", ""), ("data", "data.")):
        for kind, group in document.get(section, {}).items():
            for name, config in group.items():
                lifecycle = config.get("lifecycle") or {}
                conditions = tuple(
                    Condition(rule, index, entry["condition"], entry["error_message"])
                    for rule in RULES
                    for index, entry in enumerate(lifecycle.get(rule, []))
                )
                if conditions:
                    arguments = {
                        key: value for key, value in config.items() if key not in ("//", "lifecycle")
                    }
                    found.append(Owner(stack, f"{prefix}{kind}.{name}", arguments, conditions))
    for name, block in document.get("check", {}).items():
        conditions = tuple(
            Condition("assert", index, entry["condition"], entry["error_message"])
            for index, entry in enumerate(block.get("assert", []))
        )
        scoped = [config for group in block.get("data", {}).values() for config in group.values()]
        found.append(Owner(stack, f"check.{name}", scoped[0] if scoped else {}, conditions))
    return found


@dataclass(frozen=True)
class Trial:
    """One owner read back with one set of attributes."""

    owner: Owner
    case: str
    """The case's name, for messages."""
    attributes: Mapping[str, Any]
    """`self`'s attributes, as the API returns them (unused for a check block)."""
    references: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    """The attributes of each object `owner.references()` names, by address."""


@dataclass(frozen=True)
class Failure:
    """A condition that stopped (an error) or warned (a check), as Terraform reports it."""

    rule: str
    index: int
    severity: str
    summary: str
    """Terraform's headline: "Resource postcondition failed", "Check block assertion failed", ..."""
    detail: str
    """The rendered error_message (or Terraform's own explanation, for an expression error)."""


def _interpolations(template: str) -> Iterator[tuple[int, int]]:
    """The (start, end) of the code inside each top-level `${...}` of a template string."""
    position = 0
    while (start := template.find("${", position)) >= 0:
        if start > 0 and template[start - 1] == "$":  # `$${` is a literal `${`
            position = start + 2
            continue
        depth, index, quoted = 1, start + 2, False
        while index < len(template) and depth:
            char = template[index]
            if quoted:
                if char == "\\":
                    index += 1
                elif char == '"':
                    quoted = False
            elif char == '"':
                quoted = True
            elif char == "{":
                depth += 1
            elif char == "}":
                depth -= 1
            index += 1
        if depth:
            raise ValueError(f"unterminated interpolation in {template!r}")
        yield start + 2, index - 1
        position = index


def _code(expression: str) -> Iterator[tuple[str, bool]]:
    """An expression split into code (True) and string literals (False)."""
    for part in re.split(r'("(?:[^"\\]|\\.)*")', expression):
        yield part, not part.startswith('"')


def _roots(template: str) -> set[str]:
    return {
        found.group(1)
        for start, end in _interpolations(template)
        for part, is_code in _code(template[start:end])
        if is_code
        for found in ROOT.finditer(part)
    }


def _rewrite(template: str, rename: Callable[[str], str]) -> str:
    """The template with the root of every traversal in its code renamed."""
    pieces, position = [], 0
    for start, end in _interpolations(template):
        pieces.append(template[position:start])
        pieces.extend(
            ROOT.sub(lambda found: rename(found.group(1)), part) if is_code else part
            for part, is_code in _code(template[start:end])
        )
        position = end
    pieces.append(template[position:])
    return "".join(pieces)


def _literal(value: Any) -> Any:
    """A value as a Terraform JSON literal: `${` in a string is escaped, not a template."""
    if isinstance(value, dict):
        return {key: _literal(child) for key, child in value.items()}
    if isinstance(value, list):
        return [_literal(child) for child in value]
    if isinstance(value, str):
        return value.replace("${", "$${").replace("%{", "%%{")
    return value


def model(trials: Sequence[Trial]) -> dict[str, Any]:
    """The Terraform JSON that evaluates every trial: trial i is `terraform_data.tI` (or
    `check.tI`), each object it names `terraform_data.tI__ADDRESS`."""
    resources: dict[str, Any] = {}
    checks: dict[str, Any] = {}
    for number, trial in enumerate(trials):
        name = f"t{number}"
        missing = sorted(trial.owner.references() - set(trial.references))
        if missing:
            raise KeyError(f"{trial.owner.address} ({trial.case}): no attributes for {', '.join(missing)}")

        def rename(root: str, name: str = name) -> str:
            if root == "self":
                return "self.input"
            return f"terraform_data.{name}__{root.replace('.', '__')}.input"

        for address, attributes in trial.references.items():
            resources[f"{name}__{address.replace('.', '__')}"] = {"input": _literal(dict(attributes))}
        conditions = {
            rule: [
                {
                    "condition": _rewrite(condition.condition, rename),
                    "error_message": _rewrite(condition.error_message, rename),
                }
                for condition in trial.owner.conditions
                if condition.rule == rule
            ]
            for rule in (*RULES, "assert")
        }
        if trial.owner.kind == "check":
            checks[name] = {"assert": conditions["assert"]}
        else:
            lifecycle = {rule: conditions[rule] for rule in RULES if conditions[rule]}
            resources[name] = {"input": _literal(dict(trial.attributes)), "lifecycle": lifecycle}
    document: dict[str, Any] = {"resource": {"terraform_data": resources}}
    if checks:
        document["check"] = checks
    return document


def evaluate(trials: Sequence[Trial], folder: Path) -> list[list[Failure]]:
    """Each trial's failed conditions (none: it passes), from one `terraform plan` in `folder`.
    A diagnostic that belongs to no trial's condition raises, with Terraform's output."""
    assert TERRAFORM is not None, "terraform is not installed"
    env = {key: os.environ[key] for key in ENV_KEYS if key in os.environ}
    env |= {"CHECKPOINT_DISABLE": "1", "TF_IN_AUTOMATION": "1"}
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "main.tf.json").write_text(json.dumps(model(trials), indent=1))

    def run(*arguments: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [TERRAFORM, *arguments], cwd=folder, env=env, capture_output=True, text=True, check=False
        )

    initialised = run("init", "-input=false", "-no-color", "-backend=false")
    if initialised.returncode != 0:
        raise AssertionError(f"terraform init failed:\n{initialised.stdout}{initialised.stderr}")
    planned = run("plan", "-json", "-input=false", "-lock=false", "-refresh=false", "-no-color")
    failures: list[list[Failure]] = [[] for _ in trials]
    for line in planned.stdout.splitlines():
        message = json.loads(line)
        diagnostic = message.get("diagnostic")
        if message.get("type") != "diagnostic" or diagnostic is None:
            continue
        context = (diagnostic.get("snippet") or {}).get("context", "")
        found = CONTEXT.match(context)
        if found is None:
            raise AssertionError(
                f"terraform reported on no trial's condition:\n{json.dumps(diagnostic, indent=1)}"
            )
        number = int((found.group(1) or found.group(3))[1:])
        failures[number].append(
            Failure(
                rule=found.group(2) or found.group(4),
                index=int(found.group(5)),
                severity=diagnostic["severity"],
                summary=diagnostic["summary"],
                detail=diagnostic.get("detail", ""),
            )
        )
    errors = any(failure.severity == "error" for failures_of in failures for failure in failures_of)
    if planned.returncode != 0 and not errors:
        raise AssertionError(f"terraform plan failed:\n{planned.stdout}{planned.stderr}")
    return failures
