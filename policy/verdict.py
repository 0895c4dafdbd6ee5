"""What a rule answers for one resource."""

from __future__ import annotations

from enum import Enum


class Verdict(Enum):
    """Outcome of one rule on one resource."""

    COMPLIANT = "compliant"
    NON_COMPLIANT = "non_compliant"
    NOT_APPLICABLE = "not_applicable"
