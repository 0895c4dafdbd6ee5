"""docs/stacks/first-deploy.md stays true of what the stacks synthesize: every resource and data
source type has a deployer role in its table (and every row is still used), the APIs it counts
are the ones enabled, and the longest wait it gives is the one the JSON holds."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from stacks.team import TEAMS_DIR, load_team_file
from stacks.validate import find_problems
from tests.stacks.conftest import Synthesized, synthesize
from tests.stacks.waits import longest_wait, seconds

FIRST_DEPLOY = Path(__file__).resolve().parents[2] / "docs" / "stacks" / "first-deploy.md"
EVERY_FEATURE = Path(__file__).parent / "fixtures" / "every_feature.py"
VALKEY_EXISTING = Path(__file__).parent / "fixtures" / "valkey_existing.py"
ROLE = re.compile(r"`(roles/[A-Za-z.]+)`")


@pytest.fixture(scope="module")
def stacks(example, payments, archive_dir) -> dict[str, Synthesized]:
    every = load_team_file(EVERY_FEATURE)
    assert find_problems([every]) == []
    return {
        "example": example,
        "payments": payments,
        "every": synthesize(every, archive_dir),
        # A team on Valkey, creating its network; one on an existing instance in a named network.
        "ledger": synthesize(load_team_file(TEAMS_DIR / "ledger.py"), archive_dir),
        "existing": synthesize(load_team_file(VALKEY_EXISTING), archive_dir),
    }


def documented_roles() -> dict[str, list[str]]:
    """The roles table of the deployer's step: type -> roles ([] for "none")."""
    table: dict[str, list[str]] = {}
    for line in FIRST_DEPLOY.read_text().splitlines():
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        if line.strip().startswith("| `") and len(cells) == 3:
            kind = cells[0].strip("`")
            table[kind] = ROLE.findall(cells[1]) if cells[1] != "none" else []
    return table


# A Scheduler job needs other permissions for each kind of target: it is listed by its target block.
SCHEDULER_JOB = "google_cloud_scheduler_job"
TARGETS = ("http_target", "app_engine_http_target", "pubsub_target")


def synthesized_types(synth: Synthesized) -> set[str]:
    document = synth.document
    jobs = document["resource"].get(SCHEDULER_JOB, {}).values()
    return {
        *(kind for kind in document["resource"] if kind != SCHEDULER_JOB),
        *(f"{SCHEDULER_JOB}.{target}" for job in jobs for target in TARGETS if target in job),
        *(f"data.{kind}" for kind in document.get("data", {})),
    }


def test_the_table_lists_a_role_or_none_for_each_row():
    table = documented_roles()
    assert len(table) >= 30
    assert all(
        roles or kind in ("time_sleep", "time_static", "google_project_service_identity")
        for kind, roles in table.items()
    )


def test_every_synthesized_type_has_a_deployer_role_in_the_doc(stacks):
    types = set().union(*(synthesized_types(synth) for synth in stacks.values()))
    assert sorted(types - set(documented_roles())) == []


def test_every_row_of_the_doc_is_a_type_some_stack_synthesizes(stacks):
    types = set().union(*(synthesized_types(synth) for synth in stacks.values()))
    assert sorted(set(documented_roles()) - types) == []


def test_an_app_engine_target_needs_schedulers_admin_and_no_act_as(stacks):
    assert f"{SCHEDULER_JOB}.app_engine_http_target" in synthesized_types(stacks["every"])
    table = documented_roles()
    # Cloud Scheduler Admin holds appengine.applications.get; no token, so no account to act as.
    assert table[f"{SCHEDULER_JOB}.app_engine_http_target"] == ["roles/cloudscheduler.admin"]
    assert table[f"{SCHEDULER_JOB}.http_target"] == [
        "roles/cloudscheduler.admin",
        "roles/iam.serviceAccountUser",
    ]


def test_the_doc_counts_the_apis_each_stack_enables(stacks):
    text = FIRST_DEPLOY.read_text()
    found = re.search(
        r"example enables (\d+), the\s+payments team (\d+), the every-feature fixture (\d+)", text
    )
    assert found is not None
    counts = [
        len(stacks[name].resources("google_project_service")) for name in ("example", "payments", "every")
    ]
    assert [int(count) for count in found.groups()] == counts


def test_the_longest_wait_in_the_doc_is_the_one_the_stacks_hold(stacks):
    found = re.search(r"\*\*(\d+) s \((\d+) min\)\*\*", FIRST_DEPLOY.read_text())
    assert found is not None
    documented = int(found.group(1))
    assert documented == 60 * int(found.group(2))
    for synth in stacks.values():
        total, chain = longest_wait(synth.document)
        assert total == documented, chain


def test_the_longest_wait_follows_references_and_depends_on():
    document = {
        "resource": {
            "time_sleep": {
                "a": {"create_duration": "60s"},
                "b": {"create_duration": "2m", "depends_on": ["time_sleep.a"]},
            },
            "google_x": {"x": {"f": "${time_sleep.b.id}"}},
            "google_y": {"y": {"g": "${google_x.x.name}", "depends_on": []}},
            "time_static": {"c": {}},
        }
    }
    document["resource"]["time_sleep"]["d"] = {"create_duration": "1h", "depends_on": ["google_y.y"]}
    assert longest_wait(document) == (3780, ["time_sleep.a", "time_sleep.b", "time_sleep.d"])


@pytest.mark.parametrize(("duration", "expected"), [("60s", 60), ("2m", 120), ("1h10m", 4200), ("1m30s", 90)])
def test_durations_read_as_time_sleep_writes_them(duration, expected):
    assert seconds(duration) == expected
