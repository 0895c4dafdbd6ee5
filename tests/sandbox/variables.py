"""The variables the sandbox suite reads, and which of them are missing.

The suite never reads a credential itself: GOOGLE_APPLICATION_CREDENTIALS only has to name a
file, which the Google client libraries and Terraform's google provider then use.
"""

from __future__ import annotations

import os
from pathlib import Path

from stacks.team import REPO_ROOT

REQUIRED = ("RUNONCE_SANDBOX_PROJECT", "GOOGLE_APPLICATION_CREDENTIALS")
BUILD_TRIGGER_VARIABLE = "RUNONCE_SANDBOX_BUILD_TRIGGER"
"""A Cloud Build trigger of the sandbox project that runs as its own service account."""
FRESH_PROJECT_VARIABLES = ("RUNONCE_SANDBOX_BILLING_ACCOUNT", "RUNONCE_SANDBOX_PARENT")
"""The billing account (`billingAccounts/ID`) and the folder or organization (`folders/ID`,
`organizations/ID`) the fresh project test creates its project with."""
DEFAULT_REGION = "europe-west1"
SANDBOX_OUT = REPO_ROOT / "build" / "sandbox"
"""Where the sandbox stack is synthesized (cdktf's layout: stacks/<team> inside)."""


def missing(names: tuple[str, ...]) -> list[str]:
    """The variables of `names` that are not set (or, for the credentials, point at no file)."""
    absent = [name for name in names if not os.environ.get(name)]
    credentials = os.environ.get("GOOGLE_APPLICATION_CREDENTIALS")
    if "GOOGLE_APPLICATION_CREDENTIALS" in names and credentials and not Path(credentials).is_file():
        absent.append(f"GOOGLE_APPLICATION_CREDENTIALS (no file at {credentials})")
    return absent


def region() -> str:
    """The sandbox region."""
    return os.environ.get("RUNONCE_SANDBOX_REGION") or DEFAULT_REGION
