"""Every precondition, postcondition and check block of every synthesized stack (each team file of
teams/ and the every-feature fixture), evaluated by the installed Terraform (tests/stacks/conditions.py)
against the values the API returns: a good read passes every condition, each bad read stops at the
one condition it breaks with the message a user sees, and a condition without both is a failure.

Each case's attributes are what the API returns for that read, with their source; PROJECT_NUMBER
stands for the project's number throughout.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import pytest

from stacks.config.team import Team
from stacks.team import TEAMS_DIR, load_team_file
from tests.stacks.conditions import TERRAFORM, Condition, Failure, Owner, Trial, evaluate, owners
from tests.stacks.conftest import synthesize

needs_terraform = pytest.mark.skipif(TERRAFORM is None, reason="needs the terraform CLI (not on PATH)")

EVERY_FEATURE = Path(__file__).parent / "fixtures" / "every_feature.py"
VALKEY_EXISTING = Path(__file__).parent / "fixtures" / "valkey_existing.py"
PROJECT_NUMBER = "123456789012"
OTHER_PROJECT_NUMBER = 987654321098
SUMMARY = {
    "precondition": "Resource precondition failed",
    "postcondition": "Resource postcondition failed",
    "assert": "Check block assertion failed",
}

Attributes = Callable[[Team, Mapping[str, Any]], dict[str, Any]]


@dataclass(frozen=True)
class Case:
    """One read of an owner: its attributes as the API returns them, and which condition it breaks."""

    name: str
    attributes: Attributes
    """(team, the owner's synthesized arguments) -> `self`'s attributes."""
    breaks: str = ""
    """A fragment of the one condition this read must stop; "" for a read every condition passes."""


# --- Cloud Run v2 service, read by `data.google_cloud_run_v2_service` (stacks/constructs/run_service.py).
# Provider 6.50, resource_cloud_run_v2_service.go (the data source's schema): `template` is a list of
# one block; `template.service_account` Optional+Computed, filled in by the API when unset with the
# Compute Engine default account (magic-modules cloudrunv2/Service.yaml, default_from_api); `timeout`
# a duration string ("300s"); `ingress` as set; `uri` the run.app URL, https://NAME-PROJECT_NUMBER.REGION.run.app
# (Cloud Run, "Default URL for Cloud Run").
def _service(**changes: Any) -> Attributes:
    def attributes(team: Team, config: Mapping[str, Any]) -> dict[str, Any]:
        (service,) = [service for service in team.services if service.name == config["name"]]
        template = {
            "service_account": f"{service.name}-sa@{team.project}.iam.gserviceaccount.com",
            "timeout": f"{service.timeout_seconds}s",
        }
        template |= {key: value(team) for key, value in changes.items() if key in template}
        read = {
            "name": config["name"],
            "location": config["location"],
            "project": config["project"],
            "ingress": "INGRESS_TRAFFIC_INTERNAL_ONLY",
            "uri": f"https://{service.name}-{PROJECT_NUMBER}.{config['location']}.run.app",
            "template": [template],
        }
        read |= {key: value(team) for key, value in changes.items() if key not in template}
        return read

    return attributes


def _later_timeout(team: Team) -> str:
    return f"{max(service.timeout_seconds for service in team.services) + 60}s"


# --- Cloud Storage bucket, read by `data.google_storage_bucket` (stacks/constructs/event_job.py).
# Provider 6.50, resource_storage_bucket.go: `project_number` TypeInt (the API's projectNumber);
# `location` set from the API's, which is upper case (the resource's StateFunc upper-cases what is
# configured to match it: "EU", "EUROPE-WEST1").
def _bucket(project_number: int = int(PROJECT_NUMBER), location: str = "") -> Attributes:
    def attributes(team: Team, config: Mapping[str, Any]) -> dict[str, Any]:
        (job,) = [job for job in team.event_jobs if job.bucket == config["name"]]
        return {
            "name": config["name"],
            "project_number": project_number,
            "location": (location or job.bucket_location or team.region).upper(),
        }

    return attributes


def _app_engine_accounts(present: bool) -> Attributes:
    def attributes(team: Team, config: Mapping[str, Any]) -> dict[str, Any]:
        email = f"{team.project}@appspot.gserviceaccount.com"
        account = {
            "account_id": team.project,
            "disabled": False,
            "display_name": "App Engine default service account",
            "email": email,
            "member": f"serviceAccount:{email}",
            "name": f"projects/{team.project}/serviceAccounts/{email}",
            "unique_id": "104857600000000000001",
        }
        return {
            "project": config["project"],
            "regex": config["regex"],
            "accounts": [account] if present else [],
        }

    return attributes


# --- Memorystore for Valkey instance, created (`google_memorystore_instance`) or read
# (`data.google_memorystore_instance`), stacks/constructs/valkey_store.py. Provider 6.50,
# resource_memorystore_instance.go: `psc_auto_connections` a computed list whose entries carry
# `connection_type` (CONNECTION_TYPE_PRIMARY, CONNECTION_TYPE_READER for cluster mode disabled),
# `ip_address`, `port` (6379), `network` (projects/P/global/networks/N); `engine_configs` a map of
# what was set; `persistence_config` a list of one block with `mode` (DISABLED, RDB, AOF);
# `replica_count` a number; `mode`, `transit_encryption_mode`, `authorization_mode` the API's enums
# (Memorystore v1 REST reference, Instance).
def _connections(team: Team, network: str, types: tuple[str, ...]) -> list[dict[str, Any]]:
    return [
        {
            "connection_type": kind,
            "ip_address": f"10.64.0.{index + 2}",
            "port": 6379,
            "network": f"projects/{team.project}/global/networks/{network}",
            "project_id": team.project,
        }
        for index, kind in enumerate(types)
    ]


def _valkey(
    network: str = "",
    types: tuple[str, ...] = ("CONNECTION_TYPE_PRIMARY", "CONNECTION_TYPE_READER"),
    **changes: Any,
) -> Attributes:
    def attributes(team: Team, config: Mapping[str, Any]) -> dict[str, Any]:
        store = team.store
        named = network or store.network.network or f"runonce-{team.name}"
        read = {
            "instance_id": config["instance_id"],
            "location": config["location"],
            "project": config["project"],
            "mode": "CLUSTER_DISABLED",
            "engine_configs": {"maxmemory-policy": "noeviction"},
            "persistence_config": [{"mode": "AOF", "aof_config": [{"append_fsync": "EVERY_SEC"}]}],
            "transit_encryption_mode": "SERVER_AUTHENTICATION",
            "authorization_mode": "IAM_AUTH" if store.iam_auth else "AUTH_DISABLED",
            "replica_count": 1,
            "psc_auto_connections": _connections(team, named, types),
        }
        return read | changes

    return attributes


CASES: dict[str, list[Case]] = {
    "data.google_cloud_run_v2_service": [
        Case("its own account, internal ingress", _service()),
        # Cloud Run, "Restrict network ingress": Internal and Cloud Load Balancing admits what
        # Internal admits, Cloud Scheduler of the same project on the run.app URL included.
        Case(
            "internal and load balancing ingress",
            _service(ingress=lambda team: "INGRESS_TRAFFIC_INTERNAL_LOAD_BALANCER"),
        ),
        Case("all ingress", _service(ingress=lambda team: "INGRESS_TRAFFIC_ALL")),
        Case(
            "an account of another project",
            _service(service_account=lambda team: "billing@acme-shared-1.iam.gserviceaccount.com"),
        ),
        Case(
            "no account of its own: the Compute Engine default account",
            _service(service_account=lambda team: f"{PROJECT_NUMBER}-compute@developer.gserviceaccount.com"),
            breaks="template[0].service_account",
        ),
        Case(
            "the App Engine default account",
            _service(service_account=lambda team: f"{team.project}@appspot.gserviceaccount.com"),
            breaks="template[0].service_account",
        ),
        Case(
            "a request timeout other than the team file's",
            _service(timeout=_later_timeout),
            breaks="template[0].timeout",
        ),
        # Cloud Run, "Default URL": with the default URL disabled (`defaultUriDisabled`), the
        # service has no run.app URL for Scheduler to call.
        Case("no run.app URL", _service(uri=lambda team: ""), breaks="self.uri"),
    ],
    "data.google_storage_bucket": [
        Case("a bucket of the project, where its trigger is", _bucket()),
        Case(
            "a bucket of another project",
            _bucket(project_number=OTHER_PROJECT_NUMBER),
            breaks="project_number",
        ),
        Case("a bucket in another location", _bucket(location="us-central1"), breaks="location"),
    ],
    # The App Engine default account, listed by `data.google_service_accounts` (stacks/constructs/
    # app_engine.py). Provider 6.50, data_source_google_service_accounts.go: `accounts` holds each
    # account of projects.serviceAccounts.list whose email matches `regex`, with `member` set to
    # "serviceAccount:" + email; none matches when App Engine never made the account.
    "data.google_service_accounts": [
        Case("the application's default account", _app_engine_accounts(present=True)),
        Case(
            "no App Engine application", _app_engine_accounts(present=False), breaks="length(self.accounts)"
        ),
    ],
    "google_memorystore_instance": [
        Case("a primary and a reader endpoint", _valkey()),
        Case(
            "a reader endpoint only",
            _valkey(types=("CONNECTION_TYPE_READER",)),
            breaks="psc_auto_connections",
        ),
    ],
    "data.google_memorystore_instance": [
        Case("as runonce needs it", _valkey()),
        Case("cluster mode", _valkey(mode="CLUSTER"), breaks="self.mode"),
        # Memorystore's default policy (volatile-lru) is not listed among what was set.
        Case("eviction left at the default", _valkey(engine_configs={}), breaks="maxmemory-policy"),
        Case(
            "allkeys-lru",
            _valkey(engine_configs={"maxmemory-policy": "allkeys-lru"}),
            breaks="maxmemory-policy",
        ),
        Case("RDB snapshots", _valkey(persistence_config=[{"mode": "RDB"}]), breaks="persistence_config"),
        Case("no persistence block", _valkey(persistence_config=[]), breaks="persistence_config"),
        Case(
            "no encryption in transit",
            _valkey(transit_encryption_mode="TRANSIT_ENCRYPTION_DISABLED"),
            breaks="transit_encryption_mode",
        ),
        Case("no replica", _valkey(replica_count=0), breaks="replica_count"),
        # The team files on an existing instance keep Valkey(iam_auth=True): their functions send a token.
        Case(
            "no IAM authentication", _valkey(authorization_mode="AUTH_DISABLED"), breaks="authorization_mode"
        ),
        Case("endpoints in another network", _valkey(network="default"), breaks="endswith(c.network"),
    ],
}
"""The reads of each kind of owner, good and bad."""

REFERENCES: dict[str, Callable[[Team], dict[str, Any]]] = {
    # Provider 6.50, resource_google_project.go: `number` is a string (strconv.FormatInt).
    "data.google_project": lambda team: {"project_id": team.project, "number": PROJECT_NUMBER},
}
"""The attributes of each kind of object a condition names besides `self`."""


def _team_files() -> list[Path]:
    teams = sorted(path for path in TEAMS_DIR.glob("*.py") if not path.name.startswith("_"))
    return [*teams, EVERY_FEATURE, VALKEY_EXISTING]


@dataclass(frozen=True)
class Stack:
    """A synthesized team's owners of conditions, with the team its reads are computed from."""

    team: Team
    owners: list[Owner]


@pytest.fixture(scope="module")
def stacks(archive_dir) -> dict[str, Stack]:
    """Every stack's owners of conditions, by team name."""
    found = {}
    for path in _team_files():
        team = load_team_file(path)
        found[team.name] = Stack(team, owners(team.name, synthesize(team, archive_dir).document))
    return found


def _breaks(case: Case, owner: Owner) -> list[int]:
    return [number for number, condition in enumerate(owner.conditions) if case.breaks in condition.condition]


def _trials(stacks: Mapping[str, Stack]) -> list[Trial]:
    trials = []
    for stack in stacks.values():
        for owner in stack.owners:
            for case in CASES.get(owner.kind, []):
                if case.breaks and not _breaks(case, owner):
                    continue
                references = {
                    address: REFERENCES[address.rsplit(".", 1)[0]](stack.team)
                    for address in owner.references()
                }
                trials.append(Trial(owner, case.name, case.attributes(stack.team, owner.config), references))
    return trials


@pytest.fixture(scope="module")
def evaluated(stacks, tmp_path_factory) -> list[tuple[Trial, list[Failure]]]:
    """Every trial and what Terraform reported on it, from one plan."""
    trials = _trials(stacks)
    return list(zip(trials, evaluate(trials, tmp_path_factory.mktemp("conditions")), strict=True))


def _lookup(attributes: Any, path: str) -> Any:
    for step in re.findall(r"[A-Za-z0-9_-]+|\[\d+\]", path):
        attributes = attributes[int(step[1:-1])] if step.startswith("[") else attributes[step]
    return attributes


def _rendered(message: str, attributes: Mapping[str, Any]) -> str:
    """The message with each `${self.PATH}` replaced by the read's value, as Terraform renders it."""
    rendered = re.sub(r"\$\{self\.([^}]*)\}", lambda found: str(_lookup(attributes, found.group(1))), message)
    assert "${" not in rendered, f"only ${{self.PATH}} can be rendered here: {message!r}"
    return rendered


def _case(trial: Trial) -> Case:
    (case,) = [case for case in CASES[trial.owner.kind] if case.name == trial.case]
    return case


def _expected(trial: Trial) -> list[Failure]:
    case = _case(trial)
    if not case.breaks:
        return []
    return [
        Failure(
            condition.rule,
            condition.index,
            "warning" if condition.rule == "assert" else "error",
            SUMMARY[condition.rule],
            _rendered(condition.error_message, trial.attributes),
        )
        for number, condition in enumerate(trial.owner.conditions)
        if number in _breaks(case, trial.owner)
    ]


def _outcome(evaluated, stack: str, kind: str, case: str) -> list[list[Failure]]:
    found = [
        failures
        for trial, failures in evaluated
        if (trial.owner.stack, trial.owner.kind, trial.case) == (stack, kind, case)
    ]
    assert found, f"no trial of {kind} '{case}' in stack {stack}"
    return found


def test_every_condition_has_a_good_case_and_a_bad_case(stacks):
    missing = []
    for stack in stacks.values():
        for owner in stack.owners:
            cases = CASES.get(owner.kind, [])
            if not any(not case.breaks for case in cases):
                missing.append(
                    f"{owner.stack}: {owner.address}: no good case (add one to CASES['{owner.kind}'])"
                )
            for number, condition in enumerate(owner.conditions):
                if not any(case.breaks and number in _breaks(case, owner) for case in cases):
                    missing.append(
                        f"{owner.stack}: {owner.address} {condition.rule} {condition.condition}: no bad case"
                    )
    assert missing == []


def test_every_case_applies_to_some_condition(stacks):
    found = {
        (owner.kind, case.name)
        for stack in stacks.values()
        for owner in stack.owners
        for case in CASES.get(owner.kind, [])
        if not case.breaks or _breaks(case, owner)
    }
    assert sorted({(kind, case.name) for kind, cases in CASES.items() for case in cases} - found) == []


@needs_terraform
def test_every_read_passes_or_stops_at_the_condition_it_breaks_with_its_message(evaluated):
    wrong = [
        f"{trial.owner.stack}: {trial.owner.address} '{trial.case}': {failures} != {_expected(trial)}"
        for trial, failures in evaluated
        if failures != _expected(trial)
    ]
    assert wrong == []


@needs_terraform
def test_a_bucket_of_another_project_stops_the_plan_with_the_fix(evaluated):
    (failures,) = _outcome(evaluated, "every", "data.google_storage_bucket", "a bucket of another project")
    assert [failure.detail for failure in failures] == [
        "Bucket acme-every-uploads is not in project acme-every-1: an Eventarc trigger on a bucket needs "
        "the bucket in its own project. Use a bucket of the team's project, or deploy the job with the "
        "bucket's project."
    ]


@needs_terraform
def test_an_instance_without_iam_authentication_stops_a_team_that_asks_for_it_with_the_fix(evaluated):
    (failures,) = _outcome(
        evaluated, "shared-ledger", "data.google_memorystore_instance", "no IAM authentication"
    )
    assert [failure.detail for failure in failures] == [
        "Memorystore instance platform-ledger (runonce-shared-ledger, europe-west1) has authorization mode "
        "AUTH_DISABLED and the team file asks for IAM_AUTH (Valkey(iam_auth=True)): the functions' AUTH "
        "would not match the instance's and every connection would be refused. Fix: set "
        "Valkey(iam_auth=...) to match the instance, or name an instance created with --auth-mode=iam-auth."
    ]


@needs_terraform
def test_a_team_without_iam_authentication_accepts_only_an_instance_without_it(archive_dir, tmp_path):
    team = load_team_file(VALKEY_EXISTING)
    team = replace(team, store=replace(team.store, iam_auth=False))
    (owner,) = [
        owner
        for owner in owners(team.name, synthesize(team, archive_dir).document)
        if owner.kind == "data.google_memorystore_instance"
    ]
    trials = [
        Trial(owner, mode, _valkey(authorization_mode=mode)(team, owner.config))
        for mode in ("AUTH_DISABLED", "IAM_AUTH")
    ]
    disabled, required = evaluate(trials, tmp_path)
    assert disabled == []
    assert [failure.index for failure in required] == [
        number
        for number, condition in enumerate(owner.conditions)
        if "authorization_mode" in condition.condition
    ]


@needs_terraform
def test_preconditions_and_check_blocks_are_evaluated_too(tmp_path):
    # No stack writes either today; a hand-written one of each shows the harness runs them.
    bucket = "data.google_storage_bucket.uploads"
    document = {
        "resource": {
            "google_pubsub_topic": {
                "orders": {
                    "name": "orders",
                    "lifecycle": {
                        "precondition": [
                            {
                                "condition": '${data.google_project.project.number != ""}',
                                "error_message": "no number",
                            }
                        ]
                    },
                }
            }
        },
        "check": {
            "uploads": {
                "data": {"google_storage_bucket": {"uploads": {"name": "uploads"}}},
                "assert": [
                    {
                        "condition": f'${{{bucket}.location == "EU"}}',
                        "error_message": f"Bucket in ${{{bucket}.location}}",
                    }
                ],
            }
        },
    }
    topic, check = owners("hand-written", document)
    assert (topic.references(), check.references(), check.config) == (
        {"data.google_project.project"},
        {bucket},
        {"name": "uploads"},
    )
    trials = [
        Trial(
            topic,
            "a project number",
            {"name": "orders"},
            {"data.google_project.project": {"number": PROJECT_NUMBER}},
        ),
        Trial(
            topic, "no project number", {"name": "orders"}, {"data.google_project.project": {"number": ""}}
        ),
        Trial(check, "in the EU", {}, {bucket: {"location": "EU"}}),
        Trial(check, "in the US", {}, {bucket: {"location": "US"}}),
    ]
    assert evaluate(trials, tmp_path) == [
        [],
        [Failure("precondition", 0, "error", "Resource precondition failed", "no number")],
        [],
        [Failure("assert", 0, "warning", "Check block assertion failed", "Bucket in US")],
    ]


@needs_terraform
def test_a_read_without_an_attribute_a_condition_needs_is_an_error_not_a_pass(tmp_path):
    owner = Owner(
        "hand-written",
        "data.google_storage_bucket.b",
        {},
        (Condition("postcondition", 0, '${self.location == "EU"}', "elsewhere"),),
    )
    (failures,) = evaluate([Trial(owner, "no location", {"name": "b"})], tmp_path)
    assert [(failure.severity, failure.summary) for failure in failures] == [
        ("error", "Unsupported attribute")
    ]


SERVICE = "data.google_cloud_run_v2_service"


@pytest.mark.parametrize(
    ("case", "account"),
    [
        (
            "no account of its own: the Compute Engine default account",
            f"{PROJECT_NUMBER}-compute@developer.gserviceaccount.com",
        ),
        ("the App Engine default account", "acme-every-1@appspot.gserviceaccount.com"),
    ],
)
@needs_terraform
def test_an_existing_service_running_as_a_default_account_stops_the_plan_naming_it(evaluated, case, account):
    (failures,) = _outcome(evaluated, "every", SERVICE, case)
    assert [failure.summary for failure in failures] == ["Resource postcondition failed"]
    assert failures[0].detail.startswith(
        f"Cloud Run service billing-api (acme-every-1, europe-west1) runs as {account}, "
    )
    assert (
        "gcloud run services update billing-api --region=europe-west1 --service-account="
        in failures[0].detail
    )


@needs_terraform
def test_an_existing_service_with_internal_and_load_balancing_ingress_passes(evaluated):
    assert _outcome(evaluated, "every", SERVICE, "internal and load balancing ingress") == [[]]


@needs_terraform
def test_an_existing_service_without_a_run_app_url_stops_the_plan(evaluated):
    (failures,) = _outcome(evaluated, "every", SERVICE, "no run.app URL")
    assert [(failure.summary, failure.detail) for failure in failures] == [
        (
            "Resource postcondition failed",
            "Cloud Run service billing-api (acme-every-1, europe-west1) has no run.app URL (its default URL "
            "is disabled): Cloud Scheduler calls that URL, and Cloud Run admits it as internal traffic only "
            "there. Turn the service's default URL back on (defaultUriDisabled false), or remove the "
            "service's jobs.",
        )
    ]


@needs_terraform
def test_a_project_without_an_app_engine_application_stops_the_plan_with_the_fix(evaluated):
    (failures,) = _outcome(evaluated, "every", "data.google_service_accounts", "no App Engine application")
    assert [(failure.summary, failure.detail) for failure in failures] == [
        (
            "Resource postcondition failed",
            "Project acme-every-1 has no App Engine default service account "
            "(acme-every-1@appspot.gserviceaccount.com): it has no App Engine application, or that account "
            "was deleted, and the stack never creates either. Create the application (gcloud app create "
            "--region=REGION) and deploy the handlers, or remove the team's app_engine_jobs.",
        )
    ]
