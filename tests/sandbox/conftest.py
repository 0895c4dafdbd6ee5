"""Sandbox integration tests: the example team applied to a real, throwaway GCP project.

They run only with `make test-sandbox` and these variables set; otherwise every test here is
skipped with the reason below (never reported as passed):

- RUNONCE_SANDBOX_PROJECT: the project to deploy into (everything is destroyed afterwards);
- GOOGLE_APPLICATION_CREDENTIALS: a service account key file allowed to deploy there, which the
  tests also use to mint ID tokens (user credentials cannot mint them for an audience).
"""

from __future__ import annotations

import os
from dataclasses import replace
from pathlib import Path

import pytest

from stacks.team import REPO_ROOT, TEAMS_DIR, load_team_file

REQUIRED = ("RUNONCE_SANDBOX_PROJECT", "GOOGLE_APPLICATION_CREDENTIALS")
SANDBOX_OUT = REPO_ROOT / "build" / "sandbox"
STACK = "example"


def missing() -> list[str]:
    """The required variables that are not set (or point at no file)."""
    absent = [name for name in REQUIRED if not os.environ.get(name)]
    credentials = os.environ.get("GOOGLE_APPLICATION_CREDENTIALS")
    if credentials and not Path(credentials).is_file():
        absent.append(f"GOOGLE_APPLICATION_CREDENTIALS (no file at {credentials})")
    return absent


def pytest_collection_modifyitems(config, items):
    """Skip every sandbox test, naming the variables to set, unless all are set."""
    absent = missing()
    if not absent:
        return
    skip = pytest.mark.skip(reason=f"sandbox tests need a real GCP project: set {', '.join(absent)}")
    here = Path(__file__).parent
    for item in items:
        if here in Path(item.fspath).parents:
            item.add_marker(skip)


@pytest.fixture(scope="session")
def sandbox_team():
    """The example team pointed at the sandbox project, deletable so teardown leaves nothing
    (the ledger database without delete protection, the source bucket with force_destroy)."""
    team = load_team_file(TEAMS_DIR / "example.py")
    return replace(
        team, project=os.environ["RUNONCE_SANDBOX_PROJECT"], delete_protection=False, force_destroy=True
    )


@pytest.fixture(scope="session")
def sandbox_stack(sandbox_team, pytestconfig):
    """Synthesize the sandbox stack where pytest-terraform looks for it (--tf-mod-dir)."""
    from cdktf import App, TerraformOutput

    from stacks.team_stack import TeamStack

    expected = SANDBOX_OUT / "stacks"
    mod_dir = pytestconfig.getoption("dest_tf_mod_dir")
    if not mod_dir or Path(mod_dir).resolve() != expected:
        pytest.fail(
            f"run the sandbox tests with `make test-sandbox` (--tf-mod-dir={expected})", pytrace=False
        )
    app = App(outdir=str(SANDBOX_OUT))
    stack = TeamStack(app, sandbox_team)
    # Ingress stays internal-only, as in production: the tests fire the real Scheduler jobs
    # (Scheduler API jobs.run), and a direct call from the test runner must be refused.
    for name, function in stack.functions.items():
        TerraformOutput(stack, f"{name}-uri", value=function.function.service_config.uri)
    app.synth()
    return expected / STACK
