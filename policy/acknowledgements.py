"""A team's acknowledgements of policy findings, as its synthesized stack carries them.

`Team.acknowledge` maps what is acknowledged to the team's reason: a rule id (`"RO-IAM-3"`) for
that rule's findings anywhere in the team's stack, or a rule id and one resource's Terraform
address (`"RO-IAM-3:google_project_iam_member.x"`, as the report prints it) for that resource
only. The stack writes the mapping where `stacks.contract.ACKNOWLEDGED` says; the runner reads it
back, marks every matching finding with the reason, and such a finding does not fail the run.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from stacks.contract import ACKNOWLEDGED

SEPARATOR = ":"
"""Between the rule id and the resource address in a key that acknowledges one resource."""


def parse(key: str) -> tuple[str, str]:
    """(rule id, resource address) of an acknowledgement key; the address is "" for the whole stack."""
    rule_id, _, address = key.partition(SEPARATOR)
    return rule_id, address


@dataclass(frozen=True)
class Acknowledgements:
    """One stack's acknowledgements: key (`parse`) -> the team's reason."""

    reasons: Mapping[str, str] = field(default_factory=dict)

    @classmethod
    def of(cls, document: Mapping[str, Any]) -> Acknowledgements:
        """The acknowledgements a synthesized stack document carries (none if it carries none)."""
        found: Any = document
        for key in ACKNOWLEDGED.split("."):
            found = found.get(key, {}) if isinstance(found, Mapping) else {}
        if not isinstance(found, Mapping):
            return cls()
        return cls({str(key): reason for key, reason in found.items() if isinstance(reason, str)})

    def reason(self, rule_id: str, address: str) -> str:
        """Why the team accepts `rule_id`'s finding on the resource at `address` ("" if it does not):
        an acknowledgement of that resource, else one of the whole stack."""
        return self.reasons.get(f"{rule_id}{SEPARATOR}{address}") or self.reasons.get(rule_id, "")

    def unused(self, found: Iterable[tuple[str, str]]) -> list[str]:
        """The keys that match none of the (rule id, address) findings: stale, to be removed."""
        used = {key for rule_id, address in found for key in (rule_id, f"{rule_id}{SEPARATOR}{address}")}
        return [key for key in self.reasons if key not in used]
