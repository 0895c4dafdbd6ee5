"""Apply a rule pack to synthesized stacks and report findings with the resource path."""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from policy.pack import ACROSS_STACKS, LEAST_PRIVILEGE, Rule, StackSetRule
from policy.rules import Resource, Verdict


@dataclass(frozen=True)
class Finding:
    """A rule a resource does not comply with."""

    stack: str
    rule: Rule | StackSetRule
    resource: Resource
    detail: str = ""
    """What the rule found, when it says more than its explanation (the rules over all stacks)."""

    def __str__(self) -> str:
        return (
            f"{self.rule.severity.upper()} {self.rule.id} [{self.stack}] {self.resource.path} "
            f"({self.resource.address}): {self.rule.check.__name__}"
            f"{f' ({self.detail})' if self.detail else ''}. {self.rule.explanation}"
        )


def resources(stack: Mapping[str, Any]) -> Iterator[Resource]:
    """Every resource of a synthesized stack document."""
    for kind, named in stack.get("resource", {}).items():
        for name, config in named.items():
            yield Resource(type=kind, name=name, config=config, stack=stack)


def check_stack(name: str, stack: Mapping[str, Any], pack: Sequence[Rule] = LEAST_PRIVILEGE) -> list[Finding]:
    """Findings of every rule of the pack on every resource of one stack."""
    return [
        Finding(name, rule, resource)
        for resource in resources(stack)
        for rule in pack
        if rule.check(resource) is Verdict.NON_COMPLIANT
    ]


def stack_files(path: Path) -> dict[str, Path]:
    """Stack name -> synthesized JSON, from a cdktf output folder or a single `*.tf.json` file."""
    if path.is_file():
        return {path.name.removesuffix(".json").removesuffix(".tf").removesuffix(".cdk"): path}
    found = {file.parent.name: file for file in sorted(path.glob("stacks/*/cdk.tf.json"))}
    if not found:
        raise FileNotFoundError(f"no stacks/*/cdk.tf.json under {path}: run `make synth` first")
    return found


def check_stack_set(
    stacks: Mapping[str, Mapping[str, Any]], pack: Sequence[StackSetRule] = ACROSS_STACKS
) -> list[Finding]:
    """Findings of the rules over all stacks together."""
    return [
        Finding(name, rule, resource, detail)
        for rule in pack
        for name, resource, detail in rule.check(stacks)
    ]


def check_files(files: Mapping[str, Path], pack: Sequence[Rule] = LEAST_PRIVILEGE) -> list[Finding]:
    """Findings over several synthesized stack files: each stack, then all of them together."""
    stacks = {name: json.loads(file.read_text()) for name, file in files.items()}
    return [
        *(finding for name, stack in stacks.items() for finding in check_stack(name, stack, pack)),
        *check_stack_set(stacks),
    ]
