"""`Team(operators=[...])` in the synthesized stack (stacks/constructs/operators.py): each operator
gets exactly what the runonce verbs need on the team's resources; the entries are validated."""

from __future__ import annotations

from dataclasses import replace

import pytest

from stacks.config import defaults
from stacks.team import TEAMS_DIR, EventJob, Job, Team, load_team_file
from stacks.validate import find_problems
from tests.stacks.conftest import synthesize
from tests.stacks.test_services import TEAM as SERVICES_TEAM

OPS = "group:ops@example.com"


@pytest.fixture(scope="module")
def operated(archive_dir):
    """The example team (scheduled jobs and a push job on its own topic) with two operators."""
    team = replace(load_team_file(TEAMS_DIR / "example.py"), operators=[OPS, "user:alex@example.com"])
    return synthesize(team, archive_dir)


def grants_of(synth, member: str) -> list[tuple[str, str, str]]:
    """(type, role, what it is on) of every grant to `member`."""
    found = []
    for kind, grants in synth.document["resource"].items():
        if not kind.endswith("_iam_member"):
            continue
        for config in grants.values():
            if config["member"] == member:
                on = (
                    config.get("subscription")
                    or config.get("topic")
                    or config.get("condition", {}).get("expression", config.get("project"))
                )
                found.append((kind, config["role"], on))
    return sorted(found)


def ref(synth, kind: str, prefix: str) -> str:
    (name,) = [name for name in synth.resources(kind) if name.startswith(prefix)]
    return f"${{{kind}.{name}.name}}"


def test_each_operator_gets_the_ledger_the_job_runner_the_dead_letters_and_the_topic(operated):
    expected = sorted(
        [
            (
                "google_project_iam_member",
                defaults.ROLE_LEDGER,
                'resource.name == "projects/runonce-example/databases/runonce"',
            ),
            ("google_project_iam_member", defaults.ROLE_JOB_RUNNER, "runonce-example"),
            ("google_project_iam_member", defaults.ROLE_SCHEDULER_VIEWER, "runonce-example"),
            (
                "google_pubsub_subscription_iam_member",
                defaults.ROLE_SUBSCRIBER,
                ref(operated, "google_pubsub_subscription", "orders-events_dead-letter-subscription"),
            ),
            (
                "google_pubsub_topic_iam_member",
                defaults.ROLE_PUBLISHER,
                ref(operated, "google_pubsub_topic", "orders-events_topic"),
            ),
        ]
    )
    assert grants_of(operated, OPS) == expected
    assert [(k, r) for k, r, _ in grants_of(operated, "user:alex@example.com")] == [
        (k, r) for k, r, _ in expected
    ]


def test_an_event_job_on_an_existing_topic_grants_publisher_on_that_topic(archive_dir):
    example = load_team_file(TEAMS_DIR / "example.py")
    orders = replace(example.event_jobs[0], topic="orders-in")
    synth = synthesize(replace(example, event_jobs=[orders], operators=[OPS]), archive_dir)
    publishers = [on for kind, role, on in grants_of(synth, OPS) if role == defaults.ROLE_PUBLISHER]
    assert publishers == ["orders-in"]


def test_a_team_with_only_scheduled_jobs_grants_no_pubsub_and_no_operators_grant_nothing(archive_dir):
    payments = load_team_file(TEAMS_DIR / "payments.py")
    synth = synthesize(replace(payments, operators=[OPS]), archive_dir)
    assert [role for _, role, _ in grants_of(synth, OPS)] == sorted(
        [defaults.ROLE_JOB_RUNNER, defaults.ROLE_LEDGER, defaults.ROLE_SCHEDULER_VIEWER]
    )
    plain = synthesize(payments, archive_dir)
    assert not any(
        name.startswith("operators") for group in plain.document["resource"].values() for name in group
    )


@pytest.mark.parametrize(
    "only",
    [
        {"app_engine_jobs": [], "app_engine_location": ""},
        {"services": [], "service_jobs": []},
    ],
    ids=["service-jobs-only", "app-engine-jobs-only"],
)
def test_operators_of_a_team_without_function_jobs_still_get_schedulers_roles(only, archive_dir):
    team = replace(SERVICES_TEAM, operators=[OPS], **only)
    assert find_problems([team]) == [] and not team.jobs
    roles = [role for _, role, _ in grants_of(synthesize(team, archive_dir), OPS)]
    assert roles == sorted([defaults.ROLE_JOB_RUNNER, defaults.ROLE_LEDGER, defaults.ROLE_SCHEDULER_VIEWER])


GOOD = Team(
    name="acme",
    project="acme-prod-1",
    region="europe-west1",
    jobs=[Job(name="nightly", schedule="0 3 * * *", source="report")],
)


def operator_problems(*entries: str) -> list[str]:
    return [
        p.message for p in find_problems([replace(GOOD, operators=list(entries))]) if p.field == "operators"
    ]


def test_the_principal_forms_iam_takes_are_accepted():
    assert (
        operator_problems(
            "group:ops@example.com",
            "user:alex@example.com",
            "serviceAccount:robot@acme-prod-1.iam.gserviceaccount.com",
            "domain:example.com",
        )
        == []
    )


@pytest.mark.parametrize(
    ("entry", "says"),
    [
        ("allUsers", "operators[0] 'allUsers' is everyone"),
        ("allAuthenticatedUsers", "is everyone"),
        ("ops@example.com", "operators[0] 'ops@example.com' is not a principal identifier"),
        ("group:ops", "after group: an email address or domain is expected"),
        ("Group:ops@example.com", "is not a principal identifier"),
        ("domain:example", "after domain: an email address or domain is expected"),
        ("group: ops@example.com", "is not a principal identifier"),
        ("principal://iam.googleapis.com/locations/global/workforcePools/p/subject/s", "not a principal"),
    ],
)
def test_an_entry_that_is_no_principal_or_is_everyone_is_refused_with_the_forms(entry, says):
    (message,) = operator_problems(entry)
    assert says in message
    (problem,) = [p for p in find_problems([replace(GOOD, operators=[entry])]) if p.field == "operators"]
    assert problem.fix.startswith('write "group:ops@example.com"')


def test_an_operator_listed_twice_is_refused():
    assert operator_problems(OPS, OPS) == [f"{OPS!r} is listed 2 times"]


def test_operators_of_a_team_with_event_jobs_only_are_accepted():
    events = replace(
        GOOD, jobs=[], event_jobs=[EventJob(name="orders", source="orders_events")], operators=[OPS]
    )
    assert [p for p in find_problems([events]) if p.field == "operators"] == []
