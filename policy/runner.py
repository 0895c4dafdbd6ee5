"""Apply a rule pack to synthesized stacks and report findings with the resource path, and with
the team's reason where its team file acknowledges one (`policy.acknowledgements`)."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from policy.acknowledgements import Acknowledgements
from policy.pack import ACROSS_STACKS, LEAST_PRIVILEGE, Rule, StackSetRule
from policy.synthesized import Resource, Stack
from policy.verdict import Verdict


@dataclass(frozen=True)
class Finding:
    """A rule a resource does not comply with."""

    stack: str
    rule: Rule | StackSetRule
    resource: Resource
    detail: str = ""
    """What the rule found, when it says more than its explanation (the rules over all stacks)."""
    acknowledged: str = ""
    """The team's reason for accepting this finding (`Team.acknowledge`); "" when it does not."""

    @property
    def fails(self) -> bool:
        """Whether this finding fails the policy run: an error no one acknowledged."""
        return self.rule.severity == "error" and not self.acknowledged

    def __str__(self) -> str:
        line = (
            f"{self.rule.severity.upper()} {self.rule.id} [{self.stack}] {self.resource.path} "
            f"({self.resource.address}): {self.rule.check.__name__}"
            f"{f' ({self.detail})' if self.detail else ''}. {self.rule.explanation}"
        )
        return (
            f"ACKNOWLEDGED {line} Acknowledged by the team: {self.acknowledged}"
            if self.acknowledged
            else line
        )


def check_stack(name: str, stack: Mapping[str, Any], pack: Sequence[Rule] = LEAST_PRIVILEGE) -> list[Finding]:
    """Findings of every rule of the pack on every resource of one stack (acknowledged ones
    marked with the team's reason)."""
    synthesized = Stack(stack)
    acknowledgements = Acknowledgements.of(stack)
    return [
        Finding(name, rule, resource, acknowledged=acknowledgements.reason(rule.id, resource.address))
        for resource in synthesized.resources()
        for rule in pack
        if rule.check(resource, synthesized) is Verdict.NON_COMPLIANT
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
    """Findings of the rules over all stacks together (each acknowledged by its own stack's team)."""
    acknowledgements = {name: Acknowledgements.of(stack) for name, stack in stacks.items()}
    return [
        Finding(name, rule, resource, detail, acknowledgements[name].reason(rule.id, resource.address))
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
