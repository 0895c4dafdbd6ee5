"""`Team.operators`: each entry is one principal as an IAM allow policy names it, and none is public.

The forms accepted are IAM's for a Google Account, a service account, a Google group and a
Google Workspace domain (`user:`, `serviceAccount:`, `group:`, `domain:`; "Principal
identifiers", https://cloud.google.com/iam/docs/principal-identifiers). `allUsers` and
`allAuthenticatedUsers` would open the ledger to anyone.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterator

from stacks.config.problem import Problem
from stacks.config.team import Team

EMAIL_PRINCIPAL = re.compile(r"^(user|group|serviceAccount):[^@\s:]+@[A-Za-z0-9-]+(\.[A-Za-z0-9-]+)+$")
DOMAIN_PRINCIPAL = re.compile(r"^domain:[A-Za-z0-9-]+(\.[A-Za-z0-9-]+)+$")
PUBLIC = {"allUsers", "allAuthenticatedUsers"}
FORMS = 'write "group:ops@example.com" (or user:EMAIL, serviceAccount:EMAIL, domain:DOMAIN)'


def operators(team: Team) -> Iterator[Problem]:
    """Every entry a principal identifier, none public, none twice."""

    def problem(message: str, fix: str) -> Problem:
        return Problem(team.name, None, "operators", message, fix)

    for index, entry in enumerate(team.operators):
        where = f"operators[{index}] {entry!r}"
        if entry in PUBLIC:
            yield problem(f"{where} is everyone: it would open the team's ledger to anyone", FORMS)
        elif not (EMAIL_PRINCIPAL.match(entry) or DOMAIN_PRINCIPAL.match(entry)):
            kind = entry.split(":", 1)[0] if ":" in entry else ""
            known = kind in ("user", "group", "serviceAccount", "domain")
            yield problem(
                f"{where} is not a principal identifier"
                + (f" (after {kind}: an email address or domain is expected)" if known else ""),
                FORMS,
            )
    for entry, count in Counter(team.operators).items():
        if count > 1:
            yield problem(f"{entry!r} is listed {count} times", "list each operator once")
