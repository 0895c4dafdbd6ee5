"""Where a team's Terraform state lives: a local file by default, or a GCS bucket the team names.

Plain data (no cdktf import), like `stacks.team`, which uses it for `Team.state`. The stack
turns it into a backend (`stacks.team_stack.TeamStack`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

# Bucket names: 3-63 characters of lowercase letters, digits, '-', '_' and '.', starting and
# ending with a letter or digit (dotted names up to 222 are not worth supporting for state).
BUCKET_NAME = re.compile(r"^[a-z0-9][a-z0-9._-]{1,61}[a-z0-9]$")


@dataclass(frozen=True)
class GcsState:
    """Shared state in a GCS bucket (Terraform's `gcs` backend, which locks the state while a
    plan or apply runs, so two deployers cannot write it at once).

    The bucket must exist before the first deploy (create it once, versioned, in any project the
    deployers can write to); the stack does not create it. The state is stored at
    `<prefix>/default.tfstate`. The prefix is written out in the team file on purpose: renaming
    the team does not move its state, so the next plan shows the renamed resources as
    replacements instead of starting from empty state (see docs/stacks.md, "Renaming a team").
    """

    bucket: str
    """Name of an existing bucket, e.g. "acme-terraform-state"."""
    prefix: str
    """Folder inside the bucket for this team's state, e.g. "runonce/orders"; unique per team."""

    def __post_init__(self) -> None:
        if not BUCKET_NAME.match(self.bucket):
            raise ValueError(
                f"GcsState bucket {self.bucket!r} is not a bucket name: 3-63 lowercase letters, "
                'digits, "-", "_" or "."; e.g. GcsState(bucket="acme-terraform-state", '
                'prefix="runonce/orders")'
            )
        if not self.prefix.strip("/") or self.prefix != self.prefix.strip("/ "):
            raise ValueError(
                f"GcsState prefix {self.prefix!r} must name a folder without leading or trailing "
                'slashes or spaces, e.g. prefix="runonce/orders"'
            )


def local_state_file(team: str) -> str:
    """The default state file of a team, relative to the repository root. It is derived from
    the team name: renaming a team points it at a new, empty file (see docs/stacks.md)."""
    return f"terraform.{team}.tfstate"


def missing_local_state(team: str, root: Path) -> str | None:
    """A warning when the team's local state file does not exist yet (None when it does).

    A new team has no state, and its first deploy creates everything; so does a renamed team,
    whose resources are still recorded under its old name. Saying so at every synth until the
    first deploy keeps a rename from silently starting over."""
    if (root / local_state_file(team)).exists():
        return None
    return (
        f"team '{team}': no Terraform state at {local_state_file(team)} yet, so a deploy creates "
        "every resource. If the team was renamed, its resources are recorded in the old name's "
        "state file: see 'Renaming a team' in docs/stacks.md before deploying."
    )
