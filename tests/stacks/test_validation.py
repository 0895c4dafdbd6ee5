"""Synth-time validation: every problem is found, named (team, job, field) and comes with a fix."""

from __future__ import annotations

from dataclasses import replace

import pytest

from stacks import locations
from stacks.config.problem import Problem
from stacks.config.team_files import read_team_file
from stacks.team import TEAMS_DIR, Job, Retry, Team, load_team_file, load_teams
from stacks.validate import (
    InvalidConfig,
    find_problems,
    validate,
)
from stacks.validate.windows import retry_offsets_seconds, retry_window_seconds

GOOD_JOB = Job(
    name="nightly", schedule="0 3 * * *", source="report", timeout_seconds=300, attempt_deadline_seconds=180
)
GOOD_TEAM = Team(
    name="acme",
    project="acme-prod-1",
    region="europe-west1",
    jobs=[GOOD_JOB],
    alert_emails=["oncall@example.com"],
)


def problems_of_job(**changes) -> list[tuple[str | None, str]]:
    """(job, field) of every problem of a team whose only job has these changes."""
    team = replace(GOOD_TEAM, jobs=[replace(GOOD_JOB, **changes)])
    return [(problem.job, problem.field) for problem in find_problems([team])]


def problems_of_team(**changes) -> list[tuple[str | None, str]]:
    """(job, field) of every problem of the good team with these changes."""
    return [(problem.job, problem.field) for problem in find_problems([replace(GOOD_TEAM, **changes)])]


def test_the_shipped_teams_are_valid():
    validate(load_teams())


def test_the_template_is_valid_except_for_its_placeholders():
    problems = find_problems([load_team_file(TEAMS_DIR / "_template.py")])
    assert [(p.team, p.field) for p in problems] == [
        ("my-team", "name"),
        ("my-team", "project"),
        ("my-team", "labels"),
    ]
    assert all("placeholder" in p.message for p in problems)


def test_the_templates_services_service_jobs_and_app_engine_jobs_are_valid_once_uncommented(tmp_path):
    lines = (TEAMS_DIR / "_template.py").read_text().splitlines()
    start = next(n for n, line in enumerate(lines) if line.strip().startswith("# services=["))
    end = lines.index(")", start)
    assert all(line.strip().startswith("#") for line in lines[start:end])
    uncommented = [*lines[:start], *(line.replace("# ", "", 1) for line in lines[start:end]), *lines[end:]]
    text = "\n".join(uncommented).replace(
        "from stacks.team import Job, Retry, Team",
        "from stacks.team import AppEngineJob, Job, Retry, Service, ServiceJob, Team",
    )
    (tmp_path / "uncommented.py").write_text(text)
    team = load_team_file(tmp_path / "uncommented.py")
    assert [(service.name, service.deployed) for service in team.services] == [
        ("closer", True),
        ("billing-api", False),
    ]
    assert [(job.name, job.service) for job in team.service_jobs] == [
        ("books-close", "closer"),
        ("billing-close", "billing-api"),
    ]
    assert [job.name for job in team.app_engine_jobs] == ["sweep"]
    assert team.app_engine_location == "europe-west"
    assert {problem.field for problem in find_problems([team])} == {"name", "project", "labels"}


def test_a_good_team_has_no_problem():
    assert find_problems([GOOD_TEAM]) == []


@pytest.mark.parametrize("schedule", ["every 5 minutes", "0 3 * *", "0 3 * * * *", "61 * * * *", "@daily"])
def test_schedule_must_be_unix_cron(schedule):
    assert problems_of_job(schedule=schedule) == [("nightly", "schedule")]


def test_schedule_message_explains_the_lost_schedule_time_header_and_the_fix():
    team = replace(GOOD_TEAM, jobs=[replace(GOOD_JOB, schedule="every 5 minutes")])
    (problem,) = find_problems([team])
    assert "X-CloudScheduler-ScheduleTime" in str(problem)
    assert '"*/5 * * * *"' in str(problem)
    assert str(problem).startswith("team 'acme', job 'nightly', field schedule:")


def test_time_zone_must_be_known():
    assert problems_of_job(time_zone="Mars/Olympus") == [("nightly", "time_zone")]


@pytest.mark.parametrize("deadline", [14, 1801])
def test_attempt_deadline_within_15_seconds_and_30_minutes(deadline):
    assert ("nightly", "attempt_deadline_seconds") in problems_of_job(
        attempt_deadline_seconds=deadline, timeout_seconds=3600
    )


@pytest.mark.parametrize(
    ("retry", "field"),
    [
        (Retry(retry_count=6), "retry.retry_count"),
        (Retry(retry_count=-1), "retry.retry_count"),
        (Retry(min_backoff_seconds=-1), "retry.min_backoff_seconds"),
        (Retry(max_backoff_seconds=3601), "retry.max_backoff_seconds"),
        (Retry(max_doublings=17), "retry.max_doublings"),
        (Retry(max_retry_duration_seconds=-5), "retry.max_retry_duration_seconds"),
        (Retry(min_backoff_seconds=400, max_backoff_seconds=300), "retry.min_backoff_seconds"),
    ],
)
def test_retry_values_within_scheduler_ranges(retry, field):
    assert problems_of_job(retry=retry, next_run_catches_up=True) == [("nightly", field)]


def test_function_timeout_at_most_the_http_maximum():
    assert problems_of_job(timeout_seconds=3601, next_run_catches_up=True) == [("nightly", "timeout_seconds")]


def test_attempt_deadline_not_longer_than_the_function_timeout():
    assert problems_of_job(timeout_seconds=60, attempt_deadline_seconds=120) == [
        ("nightly", "attempt_deadline_seconds")
    ]


def test_lease_must_outlast_the_function_timeout():
    assert problems_of_job(env={"RUNONCE_LEASE_SECONDS": "200"}) == [("nightly", "env")]


def test_a_longer_lease_may_be_set():
    assert problems_of_job(env={"RUNONCE_LEASE_SECONDS": "500"}) == []


def test_a_crashed_run_must_get_a_retry_after_its_lease_expires():
    # Retries 20, 60 and 140 s after the first attempt all meet the 360 s lease of a crashed attempt.
    team = replace(GOOD_TEAM, jobs=[replace(GOOD_JOB, retry=Retry(retry_count=3))])
    (problem,) = find_problems([team])
    assert (problem.job, problem.field) == ("nightly", "retry")
    assert "lease (360 s)" in problem.message and "last retry comes 140 s" in problem.message
    assert "next_run_catches_up=True" in problem.fix


def test_a_longer_lease_must_still_end_before_the_last_retry():
    assert problems_of_job(env={"RUNONCE_LEASE_SECONDS": "900"}) == [("nightly", "retry")]


def test_a_job_scheduled_more_often_than_its_lease_must_say_the_next_run_catches_up():
    # Every 5 minutes with a 360 s lease: no retry can come after the lease before the next run,
    # and the default retries reach that run; each opt-out lifts its own rule.
    assert problems_of_job(schedule="*/5 * * * *") == [("nightly", "retry"), ("nightly", "retry")]
    assert problems_of_job(schedule="*/5 * * * *", next_run_catches_up=True) == [("nightly", "retry")]
    assert (
        problems_of_job(schedule="*/5 * * * *", next_run_catches_up=True, retries_may_skip_next_run=True)
        == []
    )


def test_retries_follow_scheduler_backoff_and_stop_before_the_next_run():
    assert Retry().offsets_seconds(next_run_seconds=86400) == [20, 60, 140, 300, 620]
    assert Retry().offsets_seconds(next_run_seconds=300) == [20, 60, 140]
    assert Retry(retry_count=1, max_retry_duration_seconds=100).offsets_seconds(86400) == [20, 60]


@pytest.mark.parametrize("name", ["RUNONCE_DATABASE", "RUNONCE_COLLECTION", "RUNONCE_RETENTION_SECONDS"])
def test_stack_owned_variables_cannot_be_overridden(name):
    assert problems_of_job(env={name: "x"}) == [("nightly", "env")]


def test_env_names_must_be_valid():
    assert problems_of_job(env={"1BAD-NAME": "x"}) == [("nightly", "env")]


def test_retention_must_outlast_the_retry_window():
    job = replace(GOOD_JOB, retry=Retry(retry_count=5, min_backoff_seconds=600, max_backoff_seconds=3600))
    window = retry_window_seconds(job)
    assert problems_of_job(retry=job.retry, retention_seconds=window - 1) == [
        ("nightly", "retention_seconds")
    ]
    assert problems_of_job(retry=job.retry, retention_seconds=window) == []


def test_retry_window_follows_scheduler_backoff():
    # 10 s doubled three times, then linear (80 s steps), capped at 300 s: 10+20+40+80+160 = 310 s of
    # waiting plus six attempts of 60 s.
    job = replace(
        GOOD_JOB,
        attempt_deadline_seconds=60,
        retry=Retry(retry_count=5, min_backoff_seconds=10, max_backoff_seconds=300, max_doublings=3),
    )
    assert retry_window_seconds(job) == 310 + 6 * 60


def test_scheduler_retries_until_both_retry_count_and_max_retry_duration_are_used_up():
    # API reference: with both set, retries continue until both limits are reached. Five retries
    # of 180 s attempts outlast 100 s; a 3000 s duration outlasts five retries.
    five = retry_window_seconds(replace(GOOD_JOB, retry=Retry(retry_count=5)))
    assert (
        retry_window_seconds(replace(GOOD_JOB, retry=Retry(retry_count=5, max_retry_duration_seconds=100)))
        == five
    )
    longer = replace(GOOD_JOB, retry=Retry(retry_count=5, max_retry_duration_seconds=3000))
    assert retry_window_seconds(longer) > five
    assert retry_offsets_seconds(longer.retry, 180)[-1] < 3000


@pytest.mark.parametrize("name", ["Nightly", "nightly_job", "-nightly", "nightly-", "9lives", "x" * 41])
def test_job_names_must_be_valid(name):
    assert (name, "name") in problems_of_job(name=name)


def test_function_name_must_fit_cloud_run():
    team = replace(GOOD_TEAM, name="a" * 20, jobs=[replace(GOOD_JOB, name="b" * 40)])
    problems = [(p.job, p.field, "Cloud Run" in p.message) for p in find_problems([team])]
    assert problems == [("b" * 40, "name", True)]


@pytest.mark.parametrize(
    ("changes", "field"),
    [
        ({"name": "Acme"}, "name"),
        ({"name": "a" * 21}, "name"),
        ({"project": "Acme Prod"}, "project"),
        ({"region": "Europe West"}, "region"),
        ({"database": "(default)"}, "database"),
        ({"database": "ab"}, "database"),
        ({"collection": "runs/nested"}, "collection"),
        ({"labels": {"Owner": "x"}}, "labels"),
        ({"labels": {"owner": "Mixed Case"}}, "labels"),
        ({"jobs": []}, "jobs"),
    ],
)
def test_team_fields_must_be_valid(changes, field):
    assert problems_of_team(**changes) == [(None, field)]


def test_a_team_declares_only_the_kinds_of_jobs_it_has(tmp_path):
    path = tmp_path / "acme.py"
    path.write_text(
        "from stacks.team import Service, ServiceJob, Team\n"
        'team = Team(name="acme", project="acme-prod-1", region="europe-west1",\n'
        '    alert_emails=["oncall@example.com"], services=[Service(name="api")],\n'
        '    service_jobs=[ServiceJob(name="close", schedule="0 1 * * *", service="api")])\n'
    )
    team, found = read_team_file(path)
    assert found == [] and team is not None and team.jobs == []
    assert find_problems([team]) == []


def test_a_team_without_any_job_is_still_refused():
    (problem,) = find_problems(
        [Team(name="acme", project="acme-prod-1", region="europe-west1", alerts=False)]
    )
    assert (problem.job, problem.field, problem.message) == (None, "jobs", "the team has no jobs")
    assert "ServiceJob(...)" in problem.fix and "AppEngineJob(...)" in problem.fix


def test_memory_and_instances_must_be_valid():
    assert problems_of_job(memory="1GB") == [("nightly", "memory")]
    assert problems_of_job(min_instances=4, max_instances=3) == [("nightly", "min_instances")]


def test_source_folder_must_exist_with_the_entry_point():
    assert problems_of_job(source="no-such-folder") == [("nightly", "source")]
    assert problems_of_job(entry_point="missing") == [("nightly", "entry_point")]


def test_job_labels_must_be_valid():
    assert problems_of_job(labels={"team": "A B"}) == [("nightly", "labels")]


def test_duplicate_job_names_are_reported():
    team = replace(GOOD_TEAM, jobs=[GOOD_JOB, GOOD_JOB])
    assert [(p.job, p.field) for p in find_problems([team])] == [("nightly", "name")]


def test_two_teams_may_not_share_a_name_or_a_database_in_one_project():
    other = replace(GOOD_TEAM, name="beta")
    assert [(p.team, p.field) for p in find_problems([GOOD_TEAM, other])] == [("beta", "database")]
    assert [(p.team, p.field) for p in find_problems([GOOD_TEAM, GOOD_TEAM])][:1] == [("acme", "name")]
    assert find_problems([GOOD_TEAM, replace(other, database="beta-runonce")]) == []


def test_all_problems_are_reported_together_once():
    bad = replace(GOOD_JOB, schedule="every 5 minutes", time_zone="Nowhere", timeout_seconds=4000)
    team = replace(GOOD_TEAM, region="nowhere", jobs=[bad, replace(bad, name="second")])
    with pytest.raises(InvalidConfig) as raised:
        validate([team])
    report = str(raised.value)
    assert len(raised.value.problems) == 7
    assert report.startswith("7 problem(s) in the team config:")
    assert all(f"field {field}" in report for field in ("region", "schedule", "time_zone", "timeout_seconds"))
    assert all(" Fix: " in line for line in report.splitlines()[1:])


def only_problem(**changes) -> Problem:
    """The one problem of the good team whose only job has these changes."""
    (problem,) = find_problems([replace(GOOD_TEAM, jobs=[replace(GOOD_JOB, **changes)])])
    return problem


def assert_names(problem: Problem, job: str | None, field: str, fix: str) -> None:
    """The problem names the team, the job, the field, and a fix containing `fix`."""
    assert (problem.team, problem.job, problem.field) == ("acme", job, field)
    assert fix in problem.fix
    shown = str(problem)
    assert shown.startswith("team 'acme', " + (f"job {job!r}, " if job else "") + f"field {field}: ")
    assert f"Fix: {problem.fix}." in shown


# ---- regions and locations (pinned lists in stacks/locations.py) ----


def test_a_region_typo_is_reported_with_the_nearest_regions():
    (problem,) = find_problems([replace(GOOD_TEAM, region="europe-west-1")])
    assert_names(problem, None, "region", "'europe-west1'")
    assert "stacks/locations.py" in problem.fix


def test_a_region_without_cloud_scheduler_says_which_service_is_missing():
    region = sorted(locations.FUNCTION_REGIONS - locations.SCHEDULER_REGIONS)[0]
    (problem,) = find_problems([replace(GOOD_TEAM, region=region)])
    assert_names(problem, None, "region", "use one of")
    assert "does not offer Cloud Scheduler" in problem.message


def test_a_firestore_location_typo_is_reported():
    (problem,) = find_problems([replace(GOOD_TEAM, database_location="eur4")])
    assert_names(problem, None, "database_location", "'eur3'")


def test_multi_region_firestore_locations_are_accepted():
    assert find_problems([replace(GOOD_TEAM, database_location="nam5")]) == []


# ---- schedules Scheduler does not support, or that never fire ----


@pytest.mark.parametrize(
    ("schedule", "meaning"),
    [
        ("0 3 L * *", "L (last day)"),
        ("0 3 15W * *", "W (nearest weekday)"),
        ("0 3 * * 1#2", "# (nth weekday of the month)"),
        ("0 3 ? * MON", "? (no specific value)"),
    ],
)
def test_quartz_cron_characters_are_reported_as_unsupported_by_scheduler(schedule, meaning):
    problem = only_problem(schedule=schedule)
    assert_names(problem, "nightly", "schedule", "use only numbers, names")
    assert f"uses {meaning}, which Cloud Scheduler's unix-cron format does not support" in problem.message


@pytest.mark.parametrize("schedule", ["0 0 31 2 *", "0 0 30 2 *", "0 0 31 4,6,9,11 *"])
def test_a_valid_expression_that_never_fires_is_reported_as_such(schedule):
    problem = only_problem(schedule=schedule)
    assert_names(problem, "nightly", "schedule", "choose a day that exists in those months")
    assert "is valid cron but never fires" in problem.message


@pytest.mark.parametrize("schedule", ["0 0 29 2 *", "0 3 * JUL WED", "0 0 31 2 MON", "0 0 1-7 * SAT"])
def test_names_and_rare_but_real_days_are_accepted(schedule):
    assert problems_of_job(schedule=schedule) == []


# ---- runtimes, memory, environment, labels ----


@pytest.mark.parametrize("runtime", ["python39", "python3.12", "nodejs20"])
def test_unsupported_runtimes_are_reported(runtime):
    assert_names(only_problem(runtime=runtime), "nightly", "runtime", "python312")


@pytest.mark.parametrize("memory", ["1GB", "3Gi", "64Mi", "64Gi"])
def test_memory_must_be_a_gen2_tier(memory):
    assert_names(only_problem(memory=memory), "nightly", "memory", "256Mi, 512Mi, 1Gi")


@pytest.mark.parametrize(
    "name", ["PORT", "K_SERVICE", "K_REVISION", "K_CONFIGURATION", "CLOUD_RUN_JOB", "X_GOOGLE_X"]
)
def test_cloud_run_reserved_environment_variables_are_reported(name):
    problem = only_problem(env={name: "1"})
    assert_names(problem, "nightly", "env", f"rename {name}")
    assert "reserved by Cloud Run" in problem.message


def test_labels_reserved_by_google_or_the_stack_are_reported():
    (google,) = find_problems([replace(GOOD_TEAM, labels={"goog-owner": "x"})])
    assert_names(google, None, "labels", "rename the label 'goog-owner'")
    assert "goog- prefix" in google.message
    assert_names(only_problem(labels={"runonce-team": "x"}), "nightly", "labels", "rename")


def test_at_most_64_labels_counting_the_team_the_job_and_runonce_own():
    team_labels = {f"t{n}": "x" for n in range(40)}
    job_labels = {f"j{n}": "x" for n in range(22)}
    team = replace(GOOD_TEAM, labels=team_labels, jobs=[replace(GOOD_JOB, labels=job_labels)])
    (problem,) = find_problems([team])
    assert_names(problem, "nightly", "labels", "keep at most 61 labels")
    fits = replace(team, jobs=[replace(GOOD_JOB, labels=dict(list(job_labels.items())[:21]))])
    assert find_problems([fits]) == []


# ---- the entry point and the folder's requirements ----

HANDLER = """
import functions_framework
from google.cloud import firestore
from runonce import deduplicated

{body}
"""


def function_folder(
    tmp_path, body: str, requirements: str = "functions-framework==3.10.2\ngoogle-cloud-firestore==2.34.1\n"
) -> str:
    """A function folder with this handler body; returned as a Job source."""
    folder = tmp_path / "fn"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "main.py").write_text(HANDLER.format(body=body))
    (folder / "requirements.txt").write_text(requirements)
    return str(folder)


@pytest.mark.parametrize(
    "body",
    [
        "@functions_framework.http\n@deduplicated\ndef handle(request):\n    return {}",
        "@deduplicated(lease=600)\ndef handle(request):\n    return {}",
        "def job(request):\n    return {}\n\nhandle = deduplicated(job)",
        "def job(request):\n    return {}\n\nhandle = deduplicated(retention=86400)(job)",
        "def job(request):\n    return {}\n\nhandle = functions_framework.http(deduplicated(job))",
        "import runonce\n\n@runonce.deduplicated\ndef handle(request):\n    return {}",
    ],
)
def test_deduplicated_handlers_are_accepted_in_every_form(tmp_path, body):
    assert problems_of_job(source=function_folder(tmp_path, body)) == []


@pytest.mark.parametrize(
    ("body", "says"),
    [
        ("def handle(request):\n    return {}", "is not wrapped by runonce's deduplicated"),
        ("@deduplicated\nasync def handle(request):\n    return {}", "is `async def`"),
        ("async def job(request):\n    return {}\n\nhandle = deduplicated(job)", "is `async def`"),
        ("def job(request):\n    return {}\n\nhandle = job", "is not wrapped by runonce's deduplicated"),
        ("def other(request):\n    return {}", "defines no 'handle'"),
        ("def handle(request:\n", "does not parse"),
    ],
)
def test_an_entry_point_that_is_not_a_deduplicated_handler_is_reported(tmp_path, body, says):
    problem = only_problem(source=function_folder(tmp_path, body))
    assert (problem.team, problem.job, problem.field) == ("acme", "nightly", "entry_point")
    assert says in problem.message and problem.fix


def test_an_async_job_is_told_to_become_a_plain_def(tmp_path):
    body = "@deduplicated\nasync def handle(request):\n    return {}"
    assert_names(
        only_problem(source=function_folder(tmp_path, body)), "nightly", "entry_point", "plain `def`"
    )


def test_an_import_missing_from_requirements_is_named_with_its_distribution(tmp_path):
    body = (
        "from google.cloud import storage\nimport yaml\n\n@deduplicated\ndef handle(request):\n    return {}"
    )
    problems = find_problems(
        [replace(GOOD_TEAM, jobs=[replace(GOOD_JOB, source=function_folder(tmp_path, body))])]
    )
    assert [(p.field, p.fix.split("==")[0]) for p in problems] == [
        ("source", "add a pinned google-cloud-storage"),
        ("source", "add a pinned pyyaml"),
    ]
    assert "`import google.cloud.storage` needs" in problems[0].message


def test_the_bundled_runonce_needs_firestore_and_the_framework_must_be_listed(tmp_path):
    body = "@deduplicated\ndef handle(request):\n    return {}"
    source = function_folder(tmp_path, body, requirements="requests==2.32.3\n")
    problems = find_problems([replace(GOOD_TEAM, jobs=[replace(GOOD_JOB, source=source)])])
    # main.py imports functions_framework; runonce imports google.cloud.firestore, google.api_core,
    # google.auth (credentials errors) and werkzeug (returned responses).
    assert sorted(p.fix.split("==")[0] for p in problems) == [
        "add a pinned functions-framework",
        "add a pinned google-api-core",
        "add a pinned google-auth",
        "add a pinned google-cloud-firestore",
        "add a pinned werkzeug",
    ]


def test_a_runonce_module_the_handler_does_not_load_adds_no_requirement(tmp_path):
    """The proxy module needs requests and urllib3; a plain job that never imports it must list neither."""
    body = "@deduplicated\ndef handle(request):\n    return {}"
    plain = function_folder(tmp_path / "plain", body)
    assert problems_of_job(source=plain) == []
    proxied = function_folder(tmp_path / "proxied", "from runonce.targets.proxy import Proxy\n" + body)
    team = replace(GOOD_TEAM, jobs=[replace(GOOD_JOB, source=proxied)])
    fixes = sorted(p.fix.split("==")[0] for p in find_problems([team]))
    assert fixes == ["add a pinned requests", "add a pinned urllib3"]


def test_an_import_only_for_type_checking_needs_no_pin(tmp_path):
    """Only a type checker runs `if TYPE_CHECKING:`; its `else:` branch runs and still counts."""
    body = (
        "import typing\nfrom typing import TYPE_CHECKING\n\n"
        "if TYPE_CHECKING:\n    import yaml\n    from google.cloud import storage\n"
        "if typing.TYPE_CHECKING:\n    import flask\nelse:\n    import toml\n\n"
        "@deduplicated\ndef handle(request):\n    return {}"
    )
    team = replace(GOOD_TEAM, jobs=[replace(GOOD_JOB, source=function_folder(tmp_path, body))])
    assert [p.fix.split("==")[0] for p in find_problems([team])] == ["add a pinned toml"]


def test_a_runonce_module_loaded_only_for_type_checking_adds_no_requirement(tmp_path):
    """The bundled runonce counts only the modules the handler loads at run time: the proxy under
    `if TYPE_CHECKING:` asks for neither requests nor urllib3."""
    body = (
        "from typing import TYPE_CHECKING\n\nif TYPE_CHECKING:\n"
        "    from runonce.targets.proxy import Proxy\n\n@deduplicated\ndef handle(request):\n    return {}"
    )
    assert problems_of_job(source=function_folder(tmp_path, body)) == []


def test_an_import_guarded_by_an_import_error_handler_needs_no_pin(tmp_path):
    """An optional import (its module answers its own error when it is missing, as the bundled
    runonce does for the Valkey store's client) asks for no pin; the same import unguarded, or in
    the handler or the else branch of that try, still does. Before, every Firestore team's synth
    failed: the bundled runonce's `from .valkey import connect` asked every folder for valkey."""
    body = (
        "try:\n    import yaml\nexcept ImportError:\n    import toml\nelse:\n    import flask\n"
        "try:\n    import zmq\nexcept (KeyError, ModuleNotFoundError):\n    pass\n"
        "try:\n    import attr\nexcept KeyError:\n    pass\n\n"
        "@deduplicated\ndef handle(request):\n    return {}"
    )
    team = replace(GOOD_TEAM, jobs=[replace(GOOD_JOB, source=function_folder(tmp_path, body))])
    assert sorted(p.fix.split("==")[0] for p in find_problems([team])) == [
        "add a pinned attrs",
        "add a pinned toml",
    ]


def test_the_bundled_runonce_asks_no_folder_for_the_valkey_client():
    """runonce loads `runonce.store.valkey` (and its client) only when RUNONCE_STORE chooses it: the
    example's folders, which do not list valkey, pass."""
    assert problems_of_job() == []
    assert "valkey" not in (GOOD_JOB.source_dir / "requirements.txt").read_text()


def test_local_modules_nested_requirements_and_dependencies_of_listed_packages_count(tmp_path):
    body = (
        "import helpers\nimport flask\nfrom google.api_core import retry\n\n"
        "@deduplicated\ndef handle(request):\n    return {}"
    )
    source = function_folder(tmp_path, body, requirements="-r base.txt\n")
    (tmp_path / "fn" / "base.txt").write_text("functions-framework==3.10.2\ngoogle-cloud-firestore==2.34.1\n")
    (tmp_path / "fn" / "helpers.py").write_text("")
    assert problems_of_job(source=source) == []


# ---- hints that make sense ----


def test_a_zero_timeout_gets_one_problem_and_no_nonsense_deadline_hint():
    problem = only_problem(timeout_seconds=0)
    assert_names(problem, "nightly", "timeout_seconds", "choose 180-3600 s")
    assert "<= 0" not in str(problem)


def test_a_timeout_below_the_shortest_attempt_deadline_says_to_raise_the_timeout():
    problem = only_problem(timeout_seconds=10, attempt_deadline_seconds=15)
    assert_names(problem, "nightly", "attempt_deadline_seconds", "raise timeout_seconds to at least 15")
    assert "<= 10" not in problem.fix


def test_a_job_already_at_five_retries_is_not_told_to_raise_retry_count():
    # Every 15 minutes, backoff capped at 60 s: five retries end long before the 360 s lease.
    problem = only_problem(
        schedule="*/15 * * * *",
        attempt_deadline_seconds=30,
        retry=Retry(retry_count=5, max_backoff_seconds=60),
    )
    assert_names(problem, "nightly", "retry", "raise retry.min_backoff_seconds")
    assert "retry_count" not in problem.fix
    fewer = only_problem(
        schedule="*/15 * * * *",
        attempt_deadline_seconds=30,
        retry=Retry(retry_count=2, max_backoff_seconds=60),
    )
    assert "raise retry.retry_count" in fewer.fix


def test_a_first_retry_after_the_next_run_is_told_to_lower_the_backoff():
    retry = Retry(retry_count=5, min_backoff_seconds=3600, max_backoff_seconds=3600)
    lease, window = find_problems(
        [replace(GOOD_TEAM, jobs=[replace(GOOD_JOB, schedule="*/15 * * * *", retry=retry)])]
    )
    assert "lower retry.min_backoff_seconds" in lease.fix and "raise" not in lease.fix
    assert "lower retry.retry_count" in window.fix


# ---- point 8: the retry window and the next scheduled run ----


def test_retries_that_can_reach_the_next_run_are_an_error_that_explains_both_readings():
    # Every 15 minutes with the default retries: if every attempt takes its 180 s deadline, the
    # fourth retry already starts 1020 s after the first attempt.
    problem = only_problem(schedule="*/15 * * * *")
    assert_names(problem, "nightly", "retry", "retries_may_skip_next_run=True")
    assert "might be skipped if the retries continue through that time" in problem.message
    assert "retries stop at the next run" in problem.message
    assert "make the last retry end before 900 s" in problem.fix


def test_a_job_may_accept_that_its_retries_reach_the_next_run():
    assert problems_of_job(schedule="*/15 * * * *", retries_may_skip_next_run=True) == []


def test_retries_past_the_lease_and_before_the_next_run_pass():
    retry = Retry(retry_count=3, min_backoff_seconds=30)
    assert (
        problems_of_job(
            schedule="*/10 * * * *", timeout_seconds=120, attempt_deadline_seconds=60, retry=retry
        )
        == []
    )


def test_when_no_retry_can_follow_the_lease_and_end_before_the_next_run_it_says_so():
    problem = find_problems([replace(GOOD_TEAM, jobs=[replace(GOOD_JOB, schedule="*/5 * * * *")])])[0]
    assert_names(problem, "nightly", "retry", "lower timeout_seconds")
    assert "no retry can both come after the lease (360 s" in problem.message
    assert "next_run_catches_up=True" in problem.fix


# ---- point 4: derived names across all teams sharing a project ----


def test_two_teams_deriving_the_same_job_names_are_reported_with_both_files():
    orders = replace(GOOD_TEAM, name="orders", jobs=[replace(GOOD_JOB, name="nightly-export")])
    nightly = replace(
        GOOD_TEAM, name="orders-nightly", database="orders-nightly", jobs=[replace(GOOD_JOB, name="export")]
    )
    (problem,) = find_problems([orders, nightly], ["teams/orders.py", "teams/orders-nightly.py"])
    assert (problem.team, problem.job, problem.field, problem.file) == (
        "orders-nightly",
        "export",
        "name",
        "teams/orders-nightly.py",
    )
    assert "as team 'orders' job 'nightly-export' (teams/orders.py)" in problem.message
    for name in (
        "function 'orders-nightly-export'",
        "Scheduler job 'orders-nightly-export'",
        "service account 'orders-nightly-export-run'",
    ):
        assert name in problem.message
    assert "rename this job or team" in problem.fix
    assert str(problem).startswith(
        "teams/orders-nightly.py: team 'orders-nightly', job 'export', field name:"
    )


def test_the_same_names_in_different_projects_do_not_collide():
    orders = replace(GOOD_TEAM, name="orders", jobs=[replace(GOOD_JOB, name="nightly-export")])
    nightly = replace(
        GOOD_TEAM, name="orders-nightly", project="acme-other-1", jobs=[replace(GOOD_JOB, name="export")]
    )
    assert find_problems([orders, nightly]) == []


def test_bucket_names_are_unique_across_projects_too():
    # <project>-<team>-sources: project acme-prod + team x-y and project acme-prod-x + team y.
    first = replace(GOOD_TEAM, name="x-y", project="acme-prod", database="first")
    second = replace(GOOD_TEAM, name="y", project="acme-prod-x")
    (problem,) = find_problems([first, second], ["teams/a.py", "teams/b.py"])
    assert (problem.team, problem.field) == ("y", "name")
    assert "source bucket 'acme-prod-x-y-sources'" in problem.message and "teams/a.py" in problem.message


def test_two_files_with_one_team_name_are_both_named():
    problems = find_problems([GOOD_TEAM, GOOD_TEAM], ["teams/acme.py", "teams/acme2.py"])
    assert [(p.team, p.field, p.file) for p in problems] == [("acme", "name", "teams/acme2.py")]
    assert "2 team files use this name (teams/acme.py, teams/acme2.py)" in problems[0].message


def test_placeholders_left_from_the_template_are_reported():
    (problem,) = find_problems([replace(GOOD_TEAM, project="my-gcp-project")])
    assert_names(problem, None, "project", "set project to your own GCP project id")


def test_a_zero_backoff_with_a_retry_duration_is_replayed_to_a_bound_not_forever():
    # Scheduler would retry back to back until the duration runs out; the replay stops at its cap.
    retry = Retry(retry_count=0, min_backoff_seconds=0, max_backoff_seconds=0, max_retry_duration_seconds=60)
    assert len(retry_offsets_seconds(retry)) == 1000
    assert ("nightly", "retry") in problems_of_job(schedule="*/5 * * * *", retry=retry)
