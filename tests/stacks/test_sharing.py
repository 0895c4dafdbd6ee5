"""Jobs sharing functions, the accounts per team and per function, and the quotas synth counts."""

from __future__ import annotations

import time
from dataclasses import replace

import pytest

from stacks import naming
from stacks.config.sharing import explain, shared_functions
from stacks.team import TEAMS_DIR, Job, Retry, Team, load_team_file
from stacks.validate import find_problems
from stacks.validate.quotas import QUOTAS, SERVICE_ACCOUNTS, quota_problems, usage
from stacks.validate.sharing import crowded_start
from tests.stacks.conftest import synthesize

HOURLY = Job(
    name="a",
    schedule="0 * * * *",
    source="report",
    timeout_seconds=120,
    attempt_deadline_seconds=60,
    retry=Retry(retry_count=3, min_backoff_seconds=30),
)
TEAM = Team(
    name="acme",
    project="acme-prod-1",
    region="europe-west1",
    jobs=[HOURLY],
    alert_emails=["oncall@example.com"],
)


def team_of(*jobs: Job, **changes) -> Team:
    return replace(TEAM, jobs=list(jobs), **changes)


def at_minute(name: str, minute: int, **changes) -> Job:
    return replace(HOURLY, name=name, schedule=f"{minute} * * * *", **changes)


def big_team(jobs: int, functions: int, name: str = "bulk", project: str = "acme-prod-1") -> Team:
    """`jobs` hourly jobs spread over the minutes, on `functions` functions (one env value each)."""
    return replace(
        TEAM,
        name=name,
        project=project,
        jobs=[
            at_minute(f"job-{n:03d}", (n // functions) % 60, env={"REPORT_KIND": f"kind-{n % functions}"})
            for n in range(jobs)
        ],
    )


def groups(team: Team) -> list[list[str]]:
    return [function.job_names for function in shared_functions(team)]


def test_jobs_with_the_same_code_and_settings_share_one_function_named_after_the_first():
    team = team_of(at_minute("b", 1), at_minute("a", 2), at_minute("c", 3, timeout_seconds=60))
    assert groups(team) == [["b", "a"], ["c"]]
    assert [function.name for function in shared_functions(team)] == ["b", "c"]


@pytest.mark.parametrize(
    "change",
    [
        {"timeout_seconds": 100},
        {"memory": "512Mi"},
        {"runtime": "python313"},
        {"min_instances": 1},
        {"max_instances": 5},
        {"env": {"MODE": "full"}},
        {"labels": {"data-class": "confidential"}},
        {"entry_point": "other"},
        {"source": "proxy"},
    ],
)
def test_any_setting_that_differs_gives_a_job_its_own_function(change):
    assert groups(team_of(at_minute("a", 1), at_minute("b", 2, **change))) == [["a"], ["b"]]


@pytest.mark.parametrize(
    "change",
    [
        {"schedule": "30 2 * * *"},
        {"time_zone": "Europe/Berlin"},
        {"attempt_deadline_seconds": 90},
        {"retry": Retry(retry_count=5, min_backoff_seconds=40)},
        {"description": "other"},
        {"body": '{"kind": "eu"}'},
        {"retention_seconds": 30 * 24 * 3600},
    ],
)
def test_scheduler_and_ledger_settings_may_differ_on_one_function(change):
    assert groups(team_of(at_minute("a", 1), replace(at_minute("b", 2), **change))) == [["a", "b"]]


def test_a_shared_function_keeps_records_as_long_as_its_longest_retention_and_leases_by_its_timeout():
    team = team_of(at_minute("a", 1), at_minute("b", 2, retention_seconds=30 * 24 * 3600))
    (function,) = shared_functions(team)
    assert function.retention_seconds == 30 * 24 * 3600
    assert function.first.lease_seconds == 180
    assert "run records kept 2592000 s, the longest retention of its jobs" in "\n".join(explain(team))


def test_a_team_may_keep_one_function_per_job():
    jobs = (at_minute("a", 1), at_minute("b", 2))
    assert groups(team_of(*jobs, share_functions=False)) == [["a"], ["b"]]
    assert groups(team_of(*jobs, keep_per_job_accounts=True)) == [["a"], ["b"]]


def test_explain_names_the_shared_functions_and_why_the_same_code_runs_on_several():
    team = team_of(at_minute("a", 1), at_minute("b", 2), at_minute("c", 3, memory="512Mi"))
    assert explain(team) == [
        "team 'acme': 3 job(s) on 2 function(s)",
        "  function acme-a serves jobs a, b (same functions/report:handle and settings)",
        "  functions/report:handle runs on 2 functions (acme-a, acme-c): their jobs differ in memory, "
        "so each has its own function and runtime account",
    ]


def test_jobs_of_one_function_starting_in_the_same_minute_beyond_its_instances_are_rejected():
    jobs = [at_minute(name, 0) for name in "abcd"]
    crowded = crowded_start(shared_functions(team_of(*jobs))[0])
    assert crowded is not None and [job.name for job in crowded.jobs] == list("abcd") and crowded.peak == 4
    (problem,) = find_problems([team_of(*jobs)])
    assert (problem.job, problem.field) == ("d", "max_instances")
    assert "4 of them (a, b, c, d) start at Mon 00:00 UTC" in problem.message
    assert "refused (429)" in problem.message
    assert "set max_instances=4 on all 4 of them" in problem.fix
    # Enough instances, or another minute for one of them, and they fit.
    assert find_problems([team_of(*(replace(job, max_instances=4) for job in jobs))]) == []
    assert find_problems([team_of(*jobs[:3], at_minute("d", 1))]) == []


def test_starts_are_compared_in_utc_across_time_zones_and_days():
    berlin = replace(HOURLY, schedule="0 4 * * *", time_zone="Europe/Berlin")  # 03:00 UTC in winter
    utc = [replace(HOURLY, name=f"u{n}", schedule="0 3 * * *") for n in range(3)]
    assert crowded_start(shared_functions(team_of(*utc, berlin))[0]) is not None
    weekdays = [replace(HOURLY, name=f"d{day}", schedule=f"0 3 * * {day}") for day in range(1, 6)]
    assert crowded_start(shared_functions(team_of(*weekdays))[0]) is None


def test_the_team_has_two_accounts_and_each_function_its_runtime_account():
    # The watchdog adds an account, a function and a Scheduler job (the last 1 of each).
    assert usage(team_of(at_minute("a", 1), at_minute("b", 2), at_minute("c", 3, memory="512Mi"))) == {
        "service_accounts": 2 + 2 + 1,
        "cloud_run_services": 2 + 1,
        "scheduler_jobs": 3 + 1,
    }
    assert usage(team_of(at_minute("a", 1), keep_per_job_accounts=True))["service_accounts"] == 2 + 1 + 2 + 1


def test_three_hundred_jobs_fit_one_project_when_they_share_functions():
    team = big_team(300, 10)
    assert len(shared_functions(team)) == 10
    started = time.perf_counter()
    assert find_problems([team]) == []
    assert time.perf_counter() - started < 5  # synth validates it in well under a second


def test_more_service_accounts_than_the_quota_fail_synth_and_say_how_to_fit():
    team = big_team(120, 98)  # 98 functions and the watchdog's: 101 accounts
    (problem,) = [p for p in find_problems([team], ["teams/bulk.py"]) if p.field == "quotas"]
    assert problem.file == "teams/bulk.py"
    assert "would create 101 service accounts, above the quota of 100" in problem.message
    assert SERVICE_ACCOUNTS.source in problem.message
    assert "functions/report:handle on 98 functions that differ only in env" in problem.fix
    assert "quotas={'service_accounts': 101} or more" in problem.fix
    assert find_problems([replace(team, quotas={"service_accounts": 150})]) == []


def test_teams_in_one_project_count_together_and_other_projects_do_not():
    first, second = big_team(60, 50, name="first"), big_team(60, 50, name="second")
    problems = list(quota_problems([first, second], ["teams/first.py", "teams/second.py"]))
    assert [(p.team, p.file) for p in problems] == [("second", "teams/second.py")]
    assert "(team 'first' 53, team 'second' 53)" in problems[0].message  # 50 + 2 + the watchdog's
    elsewhere = replace(second, project="acme-prod-2")
    assert list(quota_problems([first, elsewhere], ["", ""])) == []


def test_scheduler_jobs_and_services_count_per_region():
    many = [big_team(400, 1, name=f"t{n}") for n in range(3)]
    (problem,) = quota_problems(many, ["", "", ""])
    assert "in europe-west1 would create 1203 Cloud Scheduler jobs" in problem.message  # 3 watchdogs
    spread = [
        replace(team, region=region)
        for team, region in zip(many, ["europe-west1", "us-central1", "us-east1"], strict=True)
    ]
    assert list(quota_problems(spread, ["", "", ""])) == []


def test_declared_quotas_are_checked():
    problems = find_problems([replace(TEAM, quotas={"service_acounts": 200, "scheduler_jobs": 0})])
    assert [(p.field, p.fix) for p in problems] == [
        ("quotas", 'write "service_accounts"'),
        ("quotas", "give a positive number"),
    ]


def test_the_quota_table_cites_its_sources():
    assert {quota.key for quota in QUOTAS} == {"service_accounts", "cloud_run_services", "scheduler_jobs"}
    assert all(quota.source.startswith("https://cloud.google.com/") and quota.says for quota in QUOTAS)


def test_a_stack_with_shared_functions_builds_one_function_and_account_per_group(archive_dir):
    team = load_team_file(TEAMS_DIR / "example.py")
    report = team.jobs[0]
    team = replace(
        team,
        jobs=[
            *team.jobs,
            replace(report, name="report-eu", retention_seconds=30 * 24 * 3600),
            replace(report, name="report-us", body='{"region": "us"}'),
        ],
    )
    synth = synthesize(team, archive_dir)
    functions = synth.resources("google_cloudfunctions2_function")
    assert sorted(config["name"] for config in functions.values()) == [
        "example-catalog-sync",
        "example-ledger-close",
        "example-orders",
        "example-report",
        "example-sync",
        "example-watchdog",
    ]
    (report_function,) = [config for config in functions.values() if config["name"] == "example-report"]
    assert report_function["service_config"]["environment_variables"]["RUNONCE_RETENTION_SECONDS"] == str(
        30 * 24 * 3600
    )
    (report_id,) = [name for name, config in functions.items() if config["name"] == "example-report"]
    uri = f"${{google_cloudfunctions2_function.{report_id}.service_config[0].uri}}"
    jobs = synth.resources("google_cloud_scheduler_job")
    calling = sorted(
        config["name"] for config in jobs.values() if config.get("http_target", {}).get("uri") == uri
    )
    assert calling == ["example-report", "example-report-eu", "example-report-us"]
    accounts = sorted(config["account_id"] for config in synth.resources("google_service_account").values())
    assert accounts == sorted(
        [
            "example-build",
            "example-call",
            "example-closer-run",  # the runtime account of the service `closer`, which the stack deploys
            *(
                naming.account_id("example", f, "run")
                for f in ("report", "sync", "catalog-sync", "ledger-close", "orders", naming.WATCHDOG)
            ),
        ]
    )
    # One invoker grant per function (the event job's and the watchdog's included) and per service
    # job's service (closer, billing-api), never two for the same binding.
    grants = synth.resources("google_cloud_run_v2_service_iam_member")
    assert len(grants) == 6 + 2 and len({config["name"] for config in grants.values()}) == 6 + 2
    assert synth.stack.function_of["report-us"] is synth.stack.functions["report"]


def test_synth_says_which_jobs_share_a_function(archive_dir):
    team = load_team_file(TEAMS_DIR / "example.py")
    stack = synthesize(team, archive_dir).stack
    infos = [entry.data for entry in stack.node.metadata if entry.type == "@cdktf/info"]
    assert infos == ["\n".join(explain(team))]
