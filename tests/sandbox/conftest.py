"""Sandbox integration tests: the sandbox team (tests/sandbox/teams.py) applied to a real,
throwaway GCP project.

They run only with `make test-sandbox` and these variables set; otherwise every test marked
`sandbox` is skipped with a reason naming the variables to set (never reported as passed):

- RUNONCE_SANDBOX_PROJECT: the project to deploy into (everything is destroyed afterwards);
- GOOGLE_APPLICATION_CREDENTIALS: a service account key file allowed to deploy there, which the
  tests also use to mint ID tokens (user credentials cannot mint them for an audience).

A test may need more (`@pytest.mark.sandbox(needs=(...))`): the build trigger test needs
RUNONCE_SANDBOX_BUILD_TRIGGER, the service job tests RUNONCE_SANDBOX_SERVICE_IMAGE, the fresh
project test RUNONCE_SANDBOX_BILLING_ACCOUNT and
RUNONCE_SANDBOX_PARENT. RUNONCE_SANDBOX_REGION (default europe-west1) picks the region.
The tests here that are not marked `sandbox` check the suite itself offline.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from tests.sandbox import teams
from tests.sandbox.teams import SANDBOX, SandboxPlace
from tests.sandbox.variables import (
    BUILD_TRIGGER_VARIABLE,
    REQUIRED,
    SANDBOX_OUT,
    SERVICE_IMAGE_VARIABLE,
    missing,
    region,
)

# pytest-timeout counts fixture setup too: the first test waits for the session's apply (and a
# test for its own effects, up to about 25 minutes); the fresh project test applies twice.
SANDBOX_TIMEOUT_SECONDS = 2 * 3600


def needed(item: pytest.Item) -> tuple[str, ...]:
    """Every variable a sandbox test needs: the required ones and its marker's `needs`."""
    extra = [name for marker in item.iter_markers("sandbox") for name in marker.kwargs.get("needs", ())]
    return (*REQUIRED, *dict.fromkeys(extra))


def pytest_collection_modifyitems(config, items):
    """Skip every sandbox test whose variables are not all set, naming the ones to set; give the
    others the sandbox's time limit instead of the suite's 300 s."""
    for item in items:
        if item.get_closest_marker("sandbox") is None:
            continue
        absent = missing(needed(item))
        if absent:
            reason = f"sandbox tests need a real GCP project: set {', '.join(absent)}"
            item.add_marker(pytest.mark.skip(reason=reason))
        else:
            item.add_marker(pytest.mark.timeout(SANDBOX_TIMEOUT_SECONDS))


@pytest.fixture(scope="session")
def session():
    """A REST session signed with the sandbox credentials."""
    from tests.sandbox.cloud import authorized_session

    return authorized_session()


@pytest.fixture(scope="session")
def sandbox_place() -> SandboxPlace:
    """The sandbox project and region."""
    return SandboxPlace(os.environ["RUNONCE_SANDBOX_PROJECT"], region())


def trigger_account(session, trigger: str) -> str:
    """The email of the service account the build trigger runs as; the test needs one."""
    from tests.sandbox.cloud import build_trigger

    account = build_trigger(session, trigger).get("serviceAccount", "")
    if not account:
        pytest.fail(f"{BUILD_TRIGGER_VARIABLE}={trigger} has no service account of its own", pytrace=False)
    return account.rsplit("/", 1)[-1]  # projects/P/serviceAccounts/EMAIL


@pytest.fixture(scope="session")
def sandbox_team(sandbox_place, session):
    """The sandbox team in the sandbox project, with the build trigger job if a trigger is given."""
    trigger = os.environ.get(BUILD_TRIGGER_VARIABLE, "")
    account = trigger_account(session, trigger) if trigger else ""
    return teams.sandbox_team(sandbox_place, trigger, account, os.environ.get(SERVICE_IMAGE_VARIABLE, ""))


@pytest.fixture(scope="session")
def sandbox_stack(sandbox_team, sandbox_place) -> Path:
    """Synthesize the sandbox stack into build/sandbox; its module folder."""
    from tests.sandbox.stack import synthesize

    # Ingress stays internal-only, as in production: the tests fire the real Scheduler jobs
    # (Scheduler API jobs.run) and publish to the real topics; a direct call is refused.
    synthesize(sandbox_team, sandbox_place, SANDBOX_OUT)
    return SANDBOX_OUT / "stacks" / SANDBOX


def terraform_runner(module_dir: Path, work_dir: Path):
    """pytest-terraform's runner for one synthesized stack: init, apply (plan, then apply that
    plan; on failure it destroys what was created and raises), destroy."""
    from pytest_terraform.tf import TerraformRunner

    binary = shutil.which("tofu") or shutil.which("terraform")
    if binary is None:
        pytest.fail("the sandbox tests need terraform on PATH", pytrace=False)
    return TerraformRunner(str(work_dir), module_dir=str(module_dir), tf_bin=binary)


@pytest.fixture(scope="session")
def deployed(sandbox_stack, tmp_path_factory):
    """The sandbox stack applied once for the session (its Terraform state), destroyed after."""
    runner = terraform_runner(sandbox_stack, tmp_path_factory.mktemp("sandbox-terraform") / "work")
    runner.init()
    state = runner.apply()
    yield state
    runner.destroy()
