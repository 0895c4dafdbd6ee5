"""A team on Memorystore for Valkey (docs/stacks/stores.md), on the synthesized JSON: the instance
and what it must be to keep runs, the network it is reached through, the shape of every value
that flows between those resources and into the functions and services, the existing-instance
path, the store's alerts, the validation of the team file's store, and the first apply's order
on the terraform_data model. A team on Firestore gets none of it (the snapshot test proves the
example team synthesizes as before)."""

from __future__ import annotations

import copy
import json
import re
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from cdktf import Testing

from runonce import contract
from stacks.constructs import provider
from stacks.team import (
    TEAMS_DIR,
    AppEngineJob,
    Job,
    Service,
    ServiceJob,
    Team,
    Valkey,
    load_team_file,
)
from stacks.validate import find_problems
from tests.stacks.conftest import Synthesized, synthesize
from tests.stacks.terraform_model import TERRAFORM, Workspace

EXISTING = Path(__file__).parent / "fixtures" / "valkey_existing.py"
NETWORK_ID = re.compile(r"^\$\{google_compute_network\.[^.}]+\.id\}$")
SUBNET_ID = re.compile(r"^\$\{google_compute_subnetwork\.[^.}]+\.id\}$")
LOCAL = re.compile(r"^\$\{local\.([A-Za-z0-9_-]+)\}$")


@pytest.fixture(scope="module")
def ledger(archive_dir) -> Synthesized:
    """teams/ledger.py, validated and synthesized."""
    team = load_team_file(TEAMS_DIR / "ledger.py")
    assert find_problems([team]) == []
    return synthesize(team, archive_dir)


@pytest.fixture(scope="module")
def existing(archive_dir) -> Synthesized:
    """A team on an existing instance in an existing network (tests/stacks/fixtures/valkey_existing.py)."""
    team = load_team_file(EXISTING)
    assert find_problems([team]) == []
    return synthesize(team, archive_dir)


SERVED = Team(
    name="served",
    project="acme-served-1",
    region="europe-west1",
    store=Valkey(),
    alerts=False,
    operators=["user:alex@example.com"],
    services=[
        Service(
            name="closer", image="europe-west1-docker.pkg.dev/acme-served-1/jobs/closer:1", env={"MODE": "x"}
        )
    ],
    service_jobs=[ServiceJob(name="close", schedule="0 7 * * *", service="closer", path="/jobs/close")],
    jobs=[],
)


@pytest.fixture(scope="module")
def served(archive_dir) -> Synthesized:
    """A Valkey team whose only job is on a Cloud Run service the stack deploys."""
    assert find_problems([SERVED]) == []
    return synthesize(SERVED, archive_dir)


def one(synth: Synthesized, kind: str) -> tuple[str, dict[str, Any]]:
    (found,) = synth.resources(kind).items()
    return found


def local_of(synth: Synthesized, reference: str) -> str:
    """The expression of the local a `${local.NAME}` value names."""
    found = LOCAL.match(reference)
    assert found, reference
    return synth.document["locals"][found.group(1)]


# --- the instance


def test_the_instance_keeps_runs_one_shard_no_eviction_aof_replicated_across_zones_encrypted(ledger):
    assert Testing.to_have_resource_with_properties(
        ledger.json,
        provider.MemorystoreInstance.TF_RESOURCE_TYPE,
        {
            "instance_id": "runonce-ledger",
            "location": "europe-west1",
            "mode": "CLUSTER_DISABLED",
            "shard_count": 1,
            "replica_count": 1,
            "node_type": "STANDARD_SMALL",
            "engine_configs": {"maxmemory-policy": "noeviction"},
            "persistence_config": {"mode": "AOF", "aof_config": {"append_fsync": "EVERY_SEC"}},
            "transit_encryption_mode": "SERVER_AUTHENTICATION",
            "authorization_mode": "IAM_AUTH",
            "zone_distribution_config": {"mode": "MULTI_ZONE"},
            "deletion_protection_enabled": True,
        },
    )


def test_the_instance_is_created_after_its_connection_policy_and_the_memorystore_api(ledger):
    (policy, _), (_, instance) = (
        one(ledger, "google_network_connectivity_service_connection_policy"),
        one(ledger, "google_memorystore_instance"),
    )
    assert f"google_network_connectivity_service_connection_policy.{policy}" in instance["depends_on"]
    assert any(
        address.startswith("google_project_service.apis_memorystore") for address in instance["depends_on"]
    )


def test_a_team_on_firestore_gets_no_store_network_and_no_connector(example):
    document = example.document["resource"]
    for kind in (
        "google_memorystore_instance",
        "google_network_connectivity_service_connection_policy",
        "google_vpc_access_connector",
        "google_compute_network",
        "google_compute_subnetwork",
    ):
        assert kind not in document
    for function in document["google_cloudfunctions2_function"].values():
        assert "vpc_connector" not in function["service_config"]
        assert contract.STORE_VARIABLE not in function["service_config"]["environment_variables"]


# --- shapes of the values that flow between resources


def test_the_endpoints_and_the_policy_name_the_network_by_its_path_not_its_self_link(ledger):
    _, instance = one(ledger, "google_memorystore_instance")
    _, policy = one(ledger, "google_network_connectivity_service_connection_policy")
    (endpoints,) = instance["desired_auto_created_endpoints"]
    # Both take projects/P/global/networks/N, which a network's `id` is (its self_link is a URL).
    assert NETWORK_ID.match(endpoints["network"])
    assert endpoints["project_id"] == "runonce-ledger"
    assert policy["network"] == endpoints["network"]
    assert policy["service_class"] == "gcp-memorystore"
    assert policy["location"] == "europe-west1"


def test_the_policy_lets_memorystore_place_endpoints_in_the_subnetwork_by_its_path(ledger):
    _, policy = one(ledger, "google_network_connectivity_service_connection_policy")
    _, subnet = one(ledger, "google_compute_subnetwork")
    (subnetwork,) = policy["psc_config"]["subnetworks"]
    assert SUBNET_ID.match(subnetwork)
    assert NETWORK_ID.match(subnet["network"])
    assert subnet["ip_cidr_range"] == "10.64.0.0/24"


def test_the_connector_is_in_the_network_by_name_with_its_own_range(ledger):
    _, connector = one(ledger, "google_vpc_access_connector")
    assert re.match(r"^\$\{google_compute_network\.[^.}]+\.name\}$", connector["network"])
    assert connector["ip_cidr_range"] == "10.64.1.0/28"
    assert (connector["min_instances"], connector["max_instances"], connector["machine_type"]) == (
        2,
        3,
        "e2-micro",
    )
    assert re.match(r"^[a-z][-a-z0-9]{0,23}[a-z0-9]$", connector["name"])


def test_every_function_and_the_watchdog_reach_the_store_through_the_connector_after_it(ledger):
    connector, _ = one(ledger, "google_vpc_access_connector")
    functions = ledger.resources("google_cloudfunctions2_function")
    assert {config["name"] for config in functions.values()} == {
        "ledger-close",
        "ledger-entries",
        "ledger-watchdog",
    }
    for config in functions.values():
        service = config["service_config"]
        assert service["vpc_connector"] == f"${{google_vpc_access_connector.{connector}.id}}"
        assert service["vpc_connector_egress_settings"] == "PRIVATE_RANGES_ONLY"
        assert f"google_vpc_access_connector.{connector}" in config["depends_on"]


def test_every_function_gets_the_store_url_and_ca_of_the_instance(ledger):
    instance, _ = one(ledger, "google_memorystore_instance")
    for config in ledger.resources("google_cloudfunctions2_function").values():
        env = config["service_config"]["environment_variables"]
        url, ca = (
            local_of(ledger, env[contract.STORE_VARIABLE]),
            local_of(ledger, env[contract.STORE_CA_VARIABLE]),
        )
        # The primary endpoint's address and port, picked by type from psc_auto_connections.
        connections = f"google_memorystore_instance.{instance}.psc_auto_connections"
        primary = 'c.connection_type == "CONNECTION_TYPE_PRIMARY"'
        assert url == (
            f"valkeys://${{one([for c in {connections} : c.ip_address if {primary}])}}"
            f":${{one([for c in {connections} : c.port if {primary}])}}?replicas=1&auth=iam"
        )
        certs = f"google_memorystore_instance.{instance}.managed_server_ca[0].ca_certs"
        assert ca == f'${{join("\\n", flatten([for ca in {certs} : ca.certificates]))}}'


def test_a_deployed_service_reaches_the_store_by_direct_vpc_egress_with_its_whole_environment(served):
    _, service = one(served, "google_cloud_run_v2_service")
    access = service["template"]["vpc_access"]
    (interface,) = access["network_interfaces"]
    assert NETWORK_ID.match(interface["network"]) and SUBNET_ID.match(interface["subnetwork"])
    assert access["egress"] == "PRIVATE_RANGES_ONLY"
    (container,) = service["template"]["containers"]
    env = {variable["name"]: variable["value"] for variable in container["env"]}
    assert {contract.STORE_VARIABLE, contract.STORE_CA_VARIABLE, "MODE", contract.LEASE_VARIABLE} <= set(env)
    assert [variable["name"] for variable in container["env"]] == sorted(env)
    subnet, _ = one(served, "google_compute_subnetwork")
    assert f"google_compute_subnetwork.{subnet}" in service["depends_on"]


# --- IAM authentication


def connection_grants(synth: Synthesized) -> dict[str, dict[str, Any]]:
    """The project grants of the connection role, by member."""
    grants = [
        config
        for config in synth.resources("google_project_iam_member").values()
        if config["role"] == "roles/memorystore.dbConnectionUser"
    ]
    by_member = {config["member"]: config for config in grants}
    assert len(by_member) == len(grants), "one grant per member"
    return by_member


def test_every_function_and_the_watchdog_may_connect_to_this_instance_only(ledger):
    grants = connection_grants(ledger)
    accounts = {
        f"serviceAccount:{config['service_config']['service_account_email']}"
        for config in ledger.resources("google_cloudfunctions2_function").values()
    }
    assert len(accounts) == 3 and set(grants) == accounts
    for grant in grants.values():
        assert grant["project"] == "runonce-ledger"
        assert grant["condition"]["expression"] == (
            'resource.name == "projects/runonce-ledger/locations/europe-west1/instances/runonce-ledger"'
        )


def test_a_deployed_services_account_and_the_operators_may_connect_to_this_instance_only(served):
    _, service = one(served, "google_cloud_run_v2_service")
    (function,) = served.resources("google_cloudfunctions2_function").values()  # the watchdog
    grants = connection_grants(served)
    assert set(grants) == {
        f"serviceAccount:{service['template']['service_account']}",
        f"serviceAccount:{function['service_config']['service_account_email']}",
        "user:alex@example.com",
    }
    expected = 'resource.name == "projects/acme-served-1/locations/europe-west1/instances/runonce-served"'
    assert {grant["condition"]["expression"] for grant in grants.values()} == {expected}


def test_an_operator_without_the_connection_grant_is_flagged_when_the_runtimes_have_it(served):
    document = copy.deepcopy(served.document)
    grants = document["resource"]["google_project_iam_member"]
    (operator,) = [
        name
        for name, config in grants.items()
        if config["member"] == "user:alex@example.com"
        and config["role"] == "roles/memorystore.dbConnectionUser"
    ]
    del grants[operator]
    from policy.runner import check_stack

    found = {finding.rule.id for finding in check_stack("served", document)}
    assert "RO-OPS-2" in found


def test_without_iam_authentication_the_url_has_no_auth_and_nobody_is_granted_the_role(archive_dir):
    team = replace(SERVED, store=Valkey(iam_auth=False))
    synth = synthesize(team, archive_dir)
    _, instance = one(synth, "google_memorystore_instance")
    assert instance["authorization_mode"] == "AUTH_DISABLED"
    (function,) = synth.resources("google_cloudfunctions2_function").values()
    url = local_of(synth, function["service_config"]["environment_variables"][contract.STORE_VARIABLE])
    assert url.endswith("?replicas=1")
    assert connection_grants(synth) == {}


# --- an existing instance


def test_an_existing_instance_and_network_are_read_and_no_policy_is_created(existing):
    data = existing.document["data"]
    (instance,) = data["google_memorystore_instance"].values()
    assert (instance["instance_id"], instance["location"]) == ("platform-ledger", "europe-west1")
    assert "depends_on" not in instance  # read at plan
    assert len(instance["lifecycle"]["postcondition"]) == 7
    assert [config["name"] for config in data["google_compute_network"].values()] == ["platform"]
    assert [config["name"] for config in data["google_compute_subnetwork"].values()] == [
        "platform-europe-west1"
    ]
    resources = existing.document["resource"]
    assert "google_network_connectivity_service_connection_policy" not in resources
    assert "google_memorystore_instance" not in resources
    (connector,) = resources["google_vpc_access_connector"].values()
    assert re.match(r"^\$\{data\.google_compute_network\.[^.}]+\.name\}$", connector["network"])


def test_an_existing_instances_url_takes_its_primary_endpoint_in_the_named_network(existing):
    (function, *_) = existing.resources("google_cloudfunctions2_function").values()
    url = local_of(existing, function["service_config"]["environment_variables"][contract.STORE_VARIABLE])
    assert 'endswith(c.network, "/global/networks/platform")' in url
    assert "data.google_memorystore_instance." in url
    assert url.endswith("&auth=iam")


def test_an_existing_instances_users_may_connect_to_it_by_its_full_name(existing):
    expected = (
        'resource.name == "projects/runonce-shared-ledger/locations/europe-west1/instances/platform-ledger"'
    )
    grants = connection_grants(existing)
    assert len(grants) == 3
    assert {grant["condition"]["expression"] for grant in grants.values()} == {expected}


# --- monitoring


def test_the_store_alerts_on_memory_evictions_and_replication_lag_of_its_instance(ledger):
    policies = {
        config["display_name"]: config
        for config in ledger.resources("google_monitoring_alert_policy").values()
    }
    filters = {
        title: condition["condition_threshold"]["filter"]
        for title, config in policies.items()
        for condition in config["conditions"]
        if "runonce-ledger" in title
    }
    assert sorted(filters) == [
        "runonce ledger: Valkey store runonce-ledger above 80% of its memory",
        "runonce ledger: Valkey store runonce-ledger evicted keys",
        "runonce ledger: Valkey store runonce-ledger replicas behind by over 64 MB",
    ]
    for text in filters.values():
        assert 'resource.type="memorystore.googleapis.com/Instance"' in text
        assert 'resource.labels.instance_id="runonce-ledger"' in text
    metrics = sorted(re.search(r'metric.type="([^"]+)"', text).group(1) for text in filters.values())
    assert metrics == [
        "memorystore.googleapis.com/instance/memory/maximum_utilization",
        "memorystore.googleapis.com/instance/replication/maximum_offset_diff",
        "memorystore.googleapis.com/instance/stats/average_evicted_keys",
    ]
    (dashboard,) = ledger.resources("google_monitoring_dashboard").values()
    titles = [
        tile["widget"]["title"] for tile in json.loads(dashboard["dashboard_json"])["mosaicLayout"]["tiles"]
    ]
    assert titles[-1] == "Valkey store runonce-ledger: memory use and replication lag"


# --- validation


LEDGER = load_team_file(TEAMS_DIR / "ledger.py")


def _valkey(**changes: Any) -> Team:
    assert isinstance(LEDGER.store, Valkey)
    return replace(LEDGER, store=replace(LEDGER.store, **changes))


def _network(**changes: Any) -> Team:
    assert isinstance(LEDGER.store, Valkey)
    return _valkey(network=replace(LEDGER.store.network, **changes))


@pytest.mark.parametrize(
    ("team", "field", "says"),
    [
        (replace(LEDGER, region="europe-north2"), "region", "not offered in 'europe-north2'"),
        (_valkey(node_type="STANDARD_LARGE"), "store.node_type", "not a node type"),
        (_valkey(replicas=0), "store.replicas", "a failover needs a replica"),
        (_valkey(replicas=3), "store.replicas", "at most 2"),
        (_valkey(wait_replicas=2), "store.wait_replicas", "every claim would fail"),
        (_valkey(append_fsync="SOMETIMES"), "store.append_fsync", "not an AOF fsync mode"),
        (_valkey(instance="Ledger_1"), "store.instance", "not an instance id"),
        (_valkey(existing=True), "store.instance", "needs the instance to read"),
        (_valkey(instance="platform", existing=True), "store.network.network", "none is named"),
        (_network(subnet="orders"), "store.network.subnet", "without its network"),
        (_network(network="projects/p/global/networks/n"), "store.network.network", "not a network name"),
        (_network(connector_range="10.64.1.0/24"), "store.network.connector_range", "not a private /28"),
        (_network(connector_range="10.64.0.16/28"), "store.network.connector_range", "overlaps"),
        (_network(subnet_range="10.64.0.0/28"), "store.network.subnet_range", "/26 or larger"),
        (_network(subnet_range="34.64.0.0/24"), "store.network.subnet_range", "not a private range"),
        (_valkey(connector_min_instances=1), "store.connector_min_instances", "out of range"),
        (_valkey(connector_max_instances=11), "store.connector_min_instances", "out of range"),
        (_valkey(connector_machine_type="n2-standard-2"), "store.connector_machine_type", "not a connector"),
        (
            replace(LEDGER, operators=["user:alex@example.com", "group:ops@example.com"]),
            "operators",
            "operators[1] 'group:ops@example.com' cannot connect",
        ),
        (replace(LEDGER, operators=["domain:example.com"]), "operators", "not groups or domains"),
        (
            replace(
                LEDGER, app_engine_jobs=[AppEngineJob(name="sweep", schedule="0 10 * * *", relative_uri="/s")]
            ),
            "app_engine_jobs",
            "runs would stay in Firestore",
        ),
        (
            replace(
                LEDGER,
                services=[Service(name="billing-api")],
                service_jobs=[
                    ServiceJob(name="invoice", schedule="0 9 * * *", service="billing-api", path="/i")
                ],
            ),
            "services[billing-api]",
            "cannot point it at the Valkey instance",
        ),
    ],
)
def test_a_store_mistake_is_reported_naming_the_field_and_the_fix(team, field, says):
    problems = [problem for problem in find_problems([team]) if problem.field == field]
    assert problems, find_problems([team])
    assert any(says in problem.message for problem in problems)
    assert all(problem.fix for problem in problems)


def test_user_and_service_account_operators_of_a_valkey_team_and_groups_without_iam_auth_are_accepted():
    people = ["user:alex@example.com", "serviceAccount:ops-bot@acme-ledger-1.iam.gserviceaccount.com"]
    assert [p for p in find_problems([replace(LEDGER, operators=people)]) if p.field == "operators"] == []
    groups = replace(_valkey(iam_auth=False), operators=["group:ops@example.com", "domain:example.com"])
    assert [p for p in find_problems([groups]) if p.field == "operators"] == []


def test_the_template_job_on_firestore_has_no_store_problem():
    team = Team(
        name="plain",
        project="acme-plain-1",
        region="europe-north2",
        jobs=[Job(name="a", schedule="0 * * * *")],
    )
    assert [problem for problem in find_problems([team]) if problem.field.startswith("store")] == []


# --- the first apply, on the terraform_data model


def _modelled(document: dict[str, Any]) -> dict[str, Any]:
    """The stack as the model can plan it: the instance's conditions read attributes a
    terraform_data does not have (test_conditions evaluates them), and the store's locals hold the
    dependency on the instance only (their expressions read its endpoints)."""
    document = copy.deepcopy(document)
    for config in document["resource"]["google_memorystore_instance"].values():
        config.pop("lifecycle", None)
    (instance,) = document["resource"]["google_memorystore_instance"]
    for name in list(document["locals"]):
        if name.startswith("valkey_"):
            document["locals"][name] = f"${{google_memorystore_instance.{instance}.id}}"
    return document


@pytest.mark.skipif(TERRAFORM is None, reason="needs the terraform CLI (not on PATH)")
def test_the_first_apply_orders_apis_policy_instance_and_connector_before_the_functions(ledger, tmp_path):
    plan = Workspace(tmp_path).plan(_modelled(ledger.document))
    assert not plan.cycle

    def address(kind: str, prefix: str = "") -> str:
        (name,) = [name for name in ledger.resources(kind) if name.startswith(prefix)]
        return f"{kind}.{name}"

    def node(kind: str, prefix: str = "") -> str:
        (found,) = plan.nodes(address(kind, prefix))
        return found

    policy = node("google_network_connectivity_service_connection_policy")
    instance, connector = node("google_memorystore_instance"), node("google_vpc_access_connector")
    assert plan.waits_for(policy, node("google_project_service", "apis_networkconnectivity"))
    assert plan.waits_for(policy, node("google_compute_subnetwork"))
    assert plan.waits_for(instance, policy)
    assert plan.waits_for(instance, node("google_project_service", "apis_memorystore"))
    assert plan.waits_for(connector, node("google_project_service", "apis_vpcaccess"))
    assert plan.waits_for(node("google_compute_subnetwork"), node("google_compute_network"))
    for name in ledger.resources("google_cloudfunctions2_function"):
        function = node("google_cloudfunctions2_function", name)
        assert plan.waits_for(function, connector)
        # Through RUNONCE_STORE: a function is created once the instance's endpoints exist.
        assert plan.waits_for(function, instance)


# --- the pack and checkov

CHECKOV = Path(__file__).parents[2] / ".venv" / "checkov" / "bin" / "checkov"


def test_the_valkey_teams_pass_the_pack(ledger, existing, served):
    from policy.runner import check_stack

    for synth in (ledger, existing, served):
        assert [
            f"{f.rule.id} {f.resource.address}" for f in check_stack(synth.team.name, synth.document)
        ] == []


@pytest.mark.skipif(
    not CHECKOV.exists(), reason=f"checkov is not installed at {CHECKOV}: `make test` installs it"
)
def test_checkov_passes_the_valkey_teams(ledger, served, tmp_path):
    from policy.checkov import run_checkov

    for synth in (ledger, served):
        file = tmp_path / f"{synth.team.name}.tf.json"
        file.write_text(synth.json)
        assert run_checkov(CHECKOV, synth.team.name, file) == []


def test_the_store_alerts_and_the_dashboard_parse_as_the_monitoring_api_types(ledger):
    from google.cloud.monitoring_dashboard_v1.types import Dashboard
    from google.protobuf import json_format

    from tests.stacks.test_monitoring import as_alert_policy

    for config in ledger.resources("google_monitoring_alert_policy").values():
        if "Valkey store" in config["display_name"]:
            parsed = as_alert_policy(config)
            assert parsed.conditions[0].condition_threshold.filter.startswith(
                'metric.type="memorystore.googleapis.com/'
            )
    (dashboard,) = ledger.resources("google_monitoring_dashboard").values()
    parsed = json_format.Parse(
        dashboard["dashboard_json"], Dashboard.pb(Dashboard()), ignore_unknown_fields=False
    )
    assert parsed.mosaic_layout.tiles[-1].widget.title.startswith("Valkey store")


def _archived_requirements(synth: Synthesized, archive_dir: Path) -> dict[str, str]:
    """Each uploaded source archive's requirements.txt (the zip the stack built in `archive_dir`,
    named by its digest as its asset is), by the object's logical id."""
    import zipfile

    texts = {}
    for name, config in synth.resources("google_storage_bucket_object").items():
        with zipfile.ZipFile(archive_dir / Path(config["source"]).name) as archive:
            texts[name] = archive.read("requirements.txt").decode()
    return texts


def test_a_valkey_teams_functions_and_watchdog_deploy_the_valkey_client_the_library_pins(
    ledger, example, archive_dir
):
    """The same function folders as a Firestore team's (which list no valkey: runonce loads its
    client only when RUNONCE_STORE chooses it), with the `valkey` extra's pin from
    functions/pyproject.toml added to the archive's requirements.txt; a Firestore team's archives
    are the folders' own (its snapshot unchanged)."""
    import tomllib

    with open(Path(__file__).parents[2] / "functions" / "pyproject.toml", "rb") as file:
        (pin,) = tomllib.load(file)["project"]["optional-dependencies"]["valkey"]
    ledger_texts = _archived_requirements(ledger, archive_dir)
    assert len(ledger_texts) == 3  # ledger-close, ledger-entries and the watchdog
    for text in ledger_texts.values():
        assert text.splitlines().count(pin) == 1, text
        assert text.endswith(f"\n{pin}\n")
    example_texts = _archived_requirements(example, archive_dir)
    assert example_texts and not any("valkey" in text for text in example_texts.values())
