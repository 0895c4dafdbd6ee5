"""The variables the sandbox suite reads, and which of them are missing.

The suite never reads a credential itself: GOOGLE_APPLICATION_CREDENTIALS only has to name a
file, which the Google client libraries and Terraform's google provider then use.
"""

from __future__ import annotations

import os
from pathlib import Path

from stacks.team import REPO_ROOT

CREDENTIALS = "GOOGLE_APPLICATION_CREDENTIALS"
REQUIRED = ("RUNONCE_SANDBOX_PROJECT", CREDENTIALS)
BUILD_TRIGGER_VARIABLE = "RUNONCE_SANDBOX_BUILD_TRIGGER"
"""A Cloud Build trigger of the sandbox project that runs as its own service account."""
SERVICE_IMAGE_VARIABLE = "RUNONCE_SANDBOX_SERVICE_IMAGE"
"""A container image (in a registry the sandbox project can pull from) of a web service whose
`POST /jobs/close` handler is `@deduplicated` (any framework: docs/library.md), for the service
jobs: the stack deploys one service from it and the sandbox stack another, the "existing" one.
`make service-image IMAGE=...` builds one (examples/service) with Cloud Build."""
VALKEY_VARIABLE = "RUNONCE_SANDBOX_VALKEY"
"""Set to 1 to deploy a team on Memorystore for Valkey too (tests/sandbox/test_valkey_store.py): its
instance takes tens of minutes to create and is billed while it lives (docs/stacks/stores.md)."""
FRESH_PROJECT_VARIABLES = ("RUNONCE_SANDBOX_BILLING_ACCOUNT", "RUNONCE_SANDBOX_PARENT")
"""The billing account (`billingAccounts/ID`) and the folder or organization (`folders/ID`,
`organizations/ID`) the fresh project test creates its project with."""
DEFAULT_REGION = "europe-west1"
SANDBOX_OUT = REPO_ROOT / "build" / "sandbox"
"""Where the sandbox stack is synthesized (cdktf's layout: stacks/<team> inside)."""


def missing(names: tuple[str, ...]) -> list[str]:
    """The variables of `names` that are not set, in that order (the credentials also when they
    name no file, said so)."""
    absent = []
    for name in names:
        value = os.environ.get(name)
        if not value:
            absent.append(name)
        elif name == CREDENTIALS and not Path(value).is_file():
            absent.append(f"{name} (no file at {value})")
    return absent


def region() -> str:
    """The sandbox region."""
    return os.environ.get("RUNONCE_SANDBOX_REGION") or DEFAULT_REGION
