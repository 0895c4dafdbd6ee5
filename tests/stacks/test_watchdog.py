"""The team's watchdog in the synthesized stack (stacks/constructs/watchdog.py): its own database,
an account that may read the team's ledger and write only its own database, its function
configured with every scheduled job (grace, lookback, and when the job was deployed), and its
Scheduler job every 10 minutes; validation of the names it takes; `Team(watchdog=False)`."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest
from cdktf import Testing as CdktfTesting

from runonce.scheduler.watchdog import parse_jobs
from stacks import naming
from stacks.config import defaults
from stacks.team import FUNCTIONS_DIR, TEAMS_DIR, EventJob, Job, Team, load_team_file
from stacks.validate import find_problems
from stacks.validate.entry_point import handler_issue, missing_requirements
from stacks.validate.quotas import usage
from stacks.validate.windows import grace_seconds
from tests.stacks.conftest import synthesize

LEDGER = 'resource.name == "projects/runonce-example/databases/runonce"'
OWN = 'resource.name == "projects/runonce-example/databases/runonce-watchdog"'


def watchdog_function(synth) -> tuple[str, dict]:
    (found,) = [
        (name, config)
        for name, config in synth.resources("google_cloudfunctions2_function").items()
        if config["name"] == "example-watchdog"
    ]
    return found


def watchdog_member(synth) -> str:
    (name,) = [
        name
        for name, config in synth.resources("google_service_account").items()
        if config["account_id"] == "example-watchdog-run"
    ]
    return f"serviceAccount:${{google_service_account.{name}.email}}"


def test_its_account_may_read_the_ledger_and_use_its_own_database_and_nothing_else(example):
    member = watchdog_member(example)
    grants = [
        (kind, config["role"], config.get("condition", {}).get("expression"))
        for kind in example.document["resource"]
        if kind.endswith("_iam_member")
        for config in example.resources(kind).values()
        if config["member"] == member
    ]
    assert sorted(grants) == [
        ("google_project_iam_member", defaults.ROLE_LEDGER, OWN),
        ("google_project_iam_member", defaults.ROLE_LEDGER_READER, LEDGER),
    ]


def test_its_own_database_is_protected_like_the_ledger_with_a_ttl_on_its_collection(example):
    assert CdktfTesting.to_have_resource_with_properties(
        example.json,
        "google_firestore_database",
        {
            "name": "runonce-watchdog",
            "location_id": "europe-west1",
            "type": "FIRESTORE_NATIVE",
            "delete_protection_state": "DELETE_PROTECTION_ENABLED",
            "deletion_policy": "ABANDON",
        },
    )
    (database,) = [
        name
        for name, config in example.resources("google_firestore_database").items()
        if config["name"] == "runonce-watchdog"
    ]
    assert CdktfTesting.to_have_resource_with_properties(
        example.json,
        "google_firestore_field",
        {
            "database": f"${{google_firestore_database.{database}.name}}",
            "collection": "watchdog_runs",
            "field": "expire_at",
            "ttl_config": {},
        },
    )


def test_its_function_runs_as_its_account_on_its_own_ledger_and_reads_the_teams(example):
    _, config = watchdog_function(example)
    service = config["service_config"]
    assert service["service_account_email"] == watchdog_member(example).removeprefix("serviceAccount:")
    assert service["ingress_settings"] == "ALLOW_INTERNAL_ONLY"
    assert config["build_config"]["entry_point"] == "handle"
    env = service["environment_variables"]
    assert {key: value for key, value in env.items() if key != "RUNONCE_WATCHDOG_JOBS"} == {
        "GOOGLE_CLOUD_PROJECT": "runonce-example",
        "RUNONCE_DATABASE": "runonce-watchdog",
        "RUNONCE_COLLECTION": "watchdog_runs",
        "RUNONCE_LEASE_SECONDS": "360",
        "RUNONCE_RETENTION_SECONDS": str(2 * 86400),
        "RUNONCE_WATCHDOG_TEAM": "example",
        "RUNONCE_WATCHDOG_LOCATION": "europe-west1",
        "RUNONCE_WATCHDOG_LEDGER_DATABASE": "runonce",
        "RUNONCE_WATCHDOG_LEDGER_COLLECTION": "scheduler_runs",
    }


def test_every_scheduled_job_is_watched_from_when_its_scheduler_job_was_deployed(example):
    _, config = watchdog_function(example)
    jobs = json.loads(config["service_config"]["environment_variables"]["RUNONCE_WATCHDOG_JOBS"])
    statics = example.resources("time_static")
    # Every Scheduler job: the function jobs', then the service jobs' (`Team.scheduled_views`).
    assert [job["job"] for job in jobs] == [job.name for job in example.team.scheduled_views]
    for job, watched in zip(example.team.scheduled_views, jobs, strict=True):
        assert watched["scheduler_job"] == naming.scheduler_job_name("example", job.name)
        assert (watched["schedule"], watched["time_zone"]) == (job.schedule, job.time_zone)
        assert watched["grace_seconds"] == grace_seconds(job)
        assert watched["lookback_seconds"] == 86400
        since = watched["since"]
        assert since.startswith("${time_static.") and since.endswith(".rfc3339}")
        static = statics[since.removeprefix("${time_static.").removesuffix(".rfc3339}")]
        (scheduler_job,) = [
            name
            for name, c in example.resources("google_cloud_scheduler_job").items()
            if c["name"] == watched["scheduler_job"]
        ]
        # Recorded once the Scheduler job exists, again when the runs it makes change.
        assert static["depends_on"] == [f"google_cloud_scheduler_job.{scheduler_job}"]
        assert static["triggers"] == {
            "scheduler_job": watched["scheduler_job"],
            "schedule": job.schedule,
            "time_zone": job.time_zone,
        }
    assert len(statics) == len(jobs)


def test_the_jobs_value_reads_back_as_the_watchdog_parses_it(example):
    _, config = watchdog_function(example)
    text = config["service_config"]["environment_variables"]["RUNONCE_WATCHDOG_JOBS"]
    # What Terraform interpolates: each time_static's RFC 3339 time.
    resolved = text
    for name in example.resources("time_static"):
        resolved = resolved.replace(f"${{time_static.{name}.rfc3339}}", "2026-12-02T01:30:07Z")
    watched = parse_jobs(resolved, "RUNONCE_WATCHDOG_JOBS")
    assert [job.scheduler_job for job in watched] == [
        "example-report",
        "example-sync",
        "example-catalog-sync",
        "example-ledger-close",
        "example-books-close",
        "example-billing-close",
        "example-sweep",
    ]


def test_its_scheduler_job_ticks_every_ten_minutes_after_its_own_invoker_grant_settled(example):
    name, _ = watchdog_function(example)
    (job,) = [
        c for c in example.resources("google_cloud_scheduler_job").values() if c["name"] == "example-watchdog"
    ]
    assert job["schedule"] == "*/10 * * * *" and job["time_zone"] == "Etc/UTC"
    assert job["http_target"]["uri"] == f"${{google_cloudfunctions2_function.{name}.service_config[0].uri}}"
    assert job["http_target"]["oidc_token"]["audience"] == job["http_target"]["uri"]
    (grant_name, grant) = next(
        (n, c)
        for n, c in example.resources("google_cloud_run_v2_service_iam_member").items()
        if c["name"] == f"${{google_cloudfunctions2_function.{name}.service_config[0].service}}"
    )
    assert grant["member"] == "serviceAccount:${google_service_account.team-invoker-account.email}"
    sleeps = example.resources("time_sleep")
    (settled,) = [
        n
        for n, c in sleeps.items()
        if c.get("depends_on") == [f"google_cloud_run_v2_service_iam_member.{grant_name}"]
    ]
    assert sleeps[settled]["create_duration"] == defaults.INVOKER_SETTLE
    assert f"google_cloud_run_v2_service_iam_member.{grant_name}" in job["depends_on"]
    assert f"time_sleep.{settled}" in job["depends_on"]


def test_its_function_waits_for_the_stacks_iam_wait_which_waits_for_its_grants(example):
    _, config = watchdog_function(example)
    assert "time_sleep.iam-settled" in config["depends_on"]
    settled = example.resources("time_sleep")["iam-settled"]["depends_on"]
    member = watchdog_member(example)
    own = [
        f"google_project_iam_member.{n}"
        for n, c in example.resources("google_project_iam_member").items()
        if c["member"] == member
    ]
    assert len(own) == 2 and set(own) <= set(settled)


def test_a_team_can_go_without_a_watchdog(archive_dir):
    team = replace(load_team_file(TEAMS_DIR / "payments.py"), watchdog=False)
    synth = synthesize(team, archive_dir)
    assert "time_static" not in synth.document["resource"]
    assert [c["name"] for c in synth.resources("google_firestore_database").values()] == [team.database]
    assert all(
        "watchdog" not in c["name"] for c in synth.resources("google_cloudfunctions2_function").values()
    )
    assert usage(team) == {key: value - 1 for key, value in usage(replace(team, watchdog=True)).items()}


def test_a_team_with_event_jobs_only_has_no_watchdog(archive_dir):
    example = load_team_file(TEAMS_DIR / "example.py")
    team = replace(example, jobs=[], services=[], service_jobs=[], app_engine_jobs=[], app_engine_location="")
    assert not team.watched
    synth = synthesize(team, archive_dir)
    assert "time_static" not in synth.document["resource"]
    assert len(synth.resources("google_firestore_database")) == 1


GOOD = Team(
    name="acme",
    project="acme-prod-1",
    region="europe-west1",
    jobs=[Job(name="nightly", schedule="0 3 * * *", source="report")],
    alert_emails=["ops@example.com"],
)


@pytest.mark.parametrize(
    "team",
    [
        replace(GOOD, jobs=[*GOOD.jobs, Job(name="watchdog", schedule="0 4 * * *", source="report")]),
        replace(GOOD, event_jobs=[EventJob(name="watchdog", source="orders_events")]),
    ],
)
def test_a_job_named_like_the_watchdog_is_refused_unless_the_watchdog_is_off(team):
    problems = [p for p in find_problems([team]) if p.job == "watchdog"]
    assert [(p.field, p.fix) for p in problems] == [
        ("name", "give the job another name, or set watchdog=False on the team")
    ]
    assert "'acme-watchdog'" in problems[0].message
    assert [p for p in find_problems([replace(team, watchdog=False)]) if p.job == "watchdog"] == []


def test_a_ledger_database_id_too_long_for_the_watchdogs_is_refused():
    longest = "d" * 54  # 54 + len("-watchdog") = 63
    assert find_problems([replace(GOOD, database=longest)]) == []
    (problem,) = find_problems([replace(GOOD, database=longest + "d")])
    assert (problem.field, problem.fix) == (
        "database",
        "use a database id of at most 54 characters, or set watchdog=False on the team",
    )
    assert find_problems([replace(GOOD, database=longest + "d", watchdog=False)]) == []


def test_the_watchdog_counts_against_the_quotas():
    assert usage(GOOD) == {
        "service_accounts": 2 + 1 + 1,
        "cloud_run_services": 1 + 1,
        "scheduler_jobs": 1 + 1,
    }
    assert usage(replace(GOOD, watchdog=False)) == {
        "service_accounts": 2 + 1,
        "cloud_run_services": 1,
        "scheduler_jobs": 1,
    }


def test_a_job_whose_records_are_gone_before_a_tick_can_judge_them_is_warned_about(archive_dir):
    short = replace(GOOD.jobs[0], retention_seconds=900)  # its grace alone is longer
    synth = synthesize(replace(GOOD, jobs=[short]), archive_dir)
    watchdog = synth.stack.watchdog
    assert watchdog is not None
    warnings = [entry.data for entry in watchdog.node.metadata if entry.type == "@cdktf/warn"]
    assert len(warnings) == 1
    assert "job 'nightly' keeps its records 900 s" in warnings[0]
    assert "raise its retention_seconds" in warnings[0]
    assert [
        entry
        for entry in synthesize(GOOD, archive_dir).stack.watchdog.node.metadata
        if entry.type == "@cdktf/warn"
    ] == []


def test_the_watchdog_folder_passes_the_checks_a_jobs_folder_does():
    folder = FUNCTIONS_DIR / naming.WATCHDOG
    assert handler_issue(folder / "main.py", "handle") is None
    assert missing_requirements(folder, FUNCTIONS_DIR / "runonce") == []


@pytest.mark.parametrize("order", ["ledger first", "watchdog first"])
def test_a_ledger_named_like_another_teams_watchdog_database_is_refused(order):
    other = replace(GOOD, name="billing", database="runonce-watchdog")
    teams = [other, GOOD] if order == "ledger first" else [GOOD, other]
    (problem,) = find_problems(teams)
    assert problem.field == "database"
    assert "Firestore database 'runonce-watchdog'" in problem.message
    assert problem.fix.startswith("set database=")
    assert find_problems([replace(t, watchdog=False) for t in teams]) == []


def test_a_job_deriving_the_watchdogs_function_name_in_another_team_is_refused():
    # Team "ord" and its job "ers-watchdog" derive "ord-ers-watchdog", team "ord-ers"'s watchdog.
    first = replace(GOOD, name="ord", jobs=[replace(GOOD.jobs[0], name="ers-watchdog")])
    second = replace(GOOD, name="ord-ers", database="ordersdb")
    problems = find_problems([first, second])
    assert [(p.team, p.field) for p in problems] == [("ord-ers", "name")]
    assert "function 'ord-ers-watchdog'" in problems[0].message
