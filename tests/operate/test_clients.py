"""Who a change is recorded as: `--by`, $USER on the emulators, else the credentials' account."""

from __future__ import annotations

from types import SimpleNamespace

import google.auth
import pytest

from operate.clients import operator
from operate.team import BadInput

pytestmark = pytest.mark.fast  # no emulator: the credentials are stand-ins


@pytest.fixture
def cloud(monkeypatch):
    """No emulator; google.auth.default answers with the credentials the test sets."""
    monkeypatch.delenv("FIRESTORE_EMULATOR_HOST", raising=False)
    found: dict[str, object] = {}
    monkeypatch.setattr(google.auth, "default", lambda: (found["credentials"], "project"))
    return found


def test_by_wins_over_everything(cloud):
    cloud["credentials"] = SimpleNamespace(service_account_email="sa@p.iam.gserviceaccount.com")
    assert operator("alice@example.com") == "alice@example.com"


def test_a_service_accounts_credentials_name_it(cloud):
    cloud["credentials"] = SimpleNamespace(service_account_email="sa@p.iam.gserviceaccount.com")
    assert operator(None) == "sa@p.iam.gserviceaccount.com"


def test_gclouds_user_credentials_name_their_account(cloud):
    cloud["credentials"] = SimpleNamespace(account="bob@example.com")
    assert operator(None) == "bob@example.com"


@pytest.mark.parametrize(
    "credentials", [SimpleNamespace(account=""), SimpleNamespace(service_account_email="default")]
)
def test_credentials_that_name_no_account_ask_for_by(cloud, credentials):
    cloud["credentials"] = credentials
    with pytest.raises(BadInput, match="--by"):
        operator(None)


def test_on_the_emulators_user_is_taken(monkeypatch):
    monkeypatch.setenv("FIRESTORE_EMULATOR_HOST", "127.0.0.1:1")
    monkeypatch.setenv("LOGNAME", "carol")
    assert operator(None) == "carol"


def test_rerun_without_credentials_is_refused_naming_them_and_the_fix(monkeypatch):
    from click.testing import CliRunner
    from google.auth.exceptions import DefaultCredentialsError

    from operate.cli import runonce

    monkeypatch.delenv("FIRESTORE_EMULATOR_HOST", raising=False)

    def no_credentials(*args, **kwargs):
        raise DefaultCredentialsError("Your default credentials were not found")

    monkeypatch.setattr(google.auth, "default", no_credentials)
    command = [
        "rerun",
        "--team",
        "example",
        "--job",
        "report",
        "--time",
        "2026-11-29T03:00:00Z",
        "--by",
        "ops",
    ]
    result = CliRunner().invoke(runonce, command)
    assert result.exit_code == 2, result.output
    assert "credentials" in result.output and "gcloud auth application-default login" in result.output
