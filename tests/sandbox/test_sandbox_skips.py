"""Offline: without the sandbox variables every sandbox test is skipped, never run or passed, and
its reason names exactly the variables still to set (not marked sandbox).

Each case runs the sandbox tests (`-m sandbox`, as `make test-sandbox` does) in a pytest of its
own with the variables removed from its environment, and reads the outcome of every test from
its JUnit report.
"""

from __future__ import annotations

import os
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from stacks.team import REPO_ROOT
from tests.sandbox.variables import (
    BUILD_TRIGGER_VARIABLE,
    FRESH_PROJECT_VARIABLES,
    REQUIRED,
    SERVICE_IMAGE_VARIABLE,
    VALKEY_VARIABLE,
)

SANDBOX_VARIABLES = (
    *REQUIRED,
    BUILD_TRIGGER_VARIABLE,
    SERVICE_IMAGE_VARIABLE,
    VALKEY_VARIABLE,
    *FRESH_PROJECT_VARIABLES,
    "RUNONCE_SANDBOX_REGION",
)
MODULES = {
    "test_deployed",
    "test_event_jobs",
    "test_target_jobs",
    "test_fresh_project",
    "test_workflow_target",
    "test_service_jobs",
    "test_valkey_store",
}
"""Every module of sandbox tests: each must show up, skipped."""


def sandbox_outcomes(tmp_path: Path, **variables: str) -> dict[str, tuple[str, str]]:
    """Run the sandbox tests with only `variables` of the sandbox's set: {test id: (outcome, message)}."""
    environment = {name: value for name, value in os.environ.items() if name not in SANDBOX_VARIABLES}
    report = tmp_path / "report.xml"
    finished = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-m",
            "sandbox",
            "tests/sandbox",
            "-p",
            "no:cacheprovider",
            f"--junitxml={report}",
            "-q",
        ],
        cwd=REPO_ROOT,
        env={**environment, **variables},
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert finished.returncode == 0, finished.stdout + finished.stderr
    outcomes = {}
    for case in ET.parse(report).iter("testcase"):
        results = [child for child in case if child.tag in ("skipped", "failure", "error")]
        outcome = results[0].tag if results else "passed"
        message = results[0].get("message", "") if results else ""
        outcomes[f"{case.get('classname')}::{case.get('name')}"] = (outcome, message)
    return outcomes


def test_without_any_variable_every_sandbox_test_is_skipped_naming_what_to_set(tmp_path):
    outcomes = sandbox_outcomes(tmp_path)

    assert {test.split("::")[0].rsplit(".", 1)[-1] for test in outcomes} == MODULES
    for test, (outcome, message) in outcomes.items():
        assert outcome == "skipped", (test, outcome, message)
        assert "set RUNONCE_SANDBOX_PROJECT, GOOGLE_APPLICATION_CREDENTIALS" in message, (test, message)
        if "build_trigger" in test:
            assert message.endswith(f", {BUILD_TRIGGER_VARIABLE}"), message
        elif "service_job" in test:
            assert message.endswith(f", {SERVICE_IMAGE_VARIABLE}"), message
        elif "valkey" in test:
            assert message.endswith(f", {VALKEY_VARIABLE}"), message
        elif "fresh_project" in test:
            assert message.endswith(", ".join(("", *FRESH_PROJECT_VARIABLES))), message
        else:
            assert message.endswith("GOOGLE_APPLICATION_CREDENTIALS"), message


@pytest.mark.parametrize("credentials", ["", "no-such-key.json"])
def test_with_a_project_but_no_usable_key_the_reason_names_the_key_not_the_project(tmp_path, credentials):
    variables = {"RUNONCE_SANDBOX_PROJECT": "runonce-sandbox-test"}
    if credentials:
        variables["GOOGLE_APPLICATION_CREDENTIALS"] = str(tmp_path / credentials)
    outcomes = sandbox_outcomes(tmp_path, **variables)

    expected = (
        f"set GOOGLE_APPLICATION_CREDENTIALS (no file at {tmp_path / credentials})"
        if credentials
        else "set GOOGLE_APPLICATION_CREDENTIALS"
    )
    assert outcomes
    for test, (outcome, message) in outcomes.items():
        assert outcome == "skipped" and expected in message, (test, message)
        assert "RUNONCE_SANDBOX_PROJECT" not in message, (test, message)
