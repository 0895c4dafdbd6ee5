"""Jobs whose target is a Google API: the proxy per target, its one grant, its APIs, validation."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from policy.checkov import ACCEPTED, SKIPPED, run_checkov
from policy.runner import check_stack
from runonce import ConfigError
from runonce.targets import parse_target
from stacks.config.targets import BuildTrigger, CloudRunJob, GoogleApi, Workflow, target_json
from stacks.team import FUNCTIONS_DIR, Job, Retry, Team
from stacks.validate import find_problems
from stacks.validate.quotas import usage
from tests.stacks.conftest import synthesize
from tests.stacks.test_policy import CHECKOV

P = "acme-prod-1"
ETL = Workflow(f"projects/{P}/locations/europe-west1/workflows/etl", {"day": "yesterday"})
EXPORT = CloudRunJob(f"projects/{P}/locations/europe-west1/jobs/export", {"taskCount": 2})
RELEASE = BuildTrigger(
    f"projects/{P}/locations/europe-west1/triggers/release", {"_ENV": "prod"}, {"branchName": "main"}
)
PUBLISH = GoogleApi(
    "POST",
    f"https://pubsub.googleapis.com/v1/projects/{P}/topics/ticks:publish",
    "roles/pubsub.publisher",
    {"messages": []},
)


def job(name: str, target, minute: int = 0, **changes) -> Job:
    hourly = Job(
        name=name,
        schedule=f"{minute} * * * *",
        target=target,
        timeout_seconds=120,
        attempt_deadline_seconds=100,
        retry=Retry(retry_count=3, min_backoff_seconds=30),
    )
    return replace(hourly, **changes)


TEAM = Team(
    name="acme",
    project=P,
    region="europe-west1",
    alert_emails=["oncall@example.com"],
    jobs=[
        job("etl-nightly", ETL),
        job("etl-again", ETL, minute=30),
        job("export", EXPORT),
        job("release", RELEASE),
        job("publish", PUBLISH),
    ],
)


@pytest.fixture(scope="module")
def synth(archive_dir):
    return synthesize(TEAM, archive_dir)


def fields(synth, kind: str) -> list[dict]:
    return list(synth.resources(kind).values())


def proxy(synth, target) -> tuple[str, dict]:
    (found,) = [
        (name, config)
        for name, config in synth.resources("google_cloudfunctions2_function").items()
        if config["service_config"]["environment_variables"].get("RUNONCE_TARGET") == target_json(target)
    ]
    return found


def runtime_member(config: dict) -> str:
    return f"serviceAccount:{config['service_config']['service_account_email']}"


def test_the_team_file_json_is_what_the_proxy_parses():
    # One definition: the team file's target, through its JSON, is the proxy's target again.
    for target in (ETL, EXPORT, RELEASE, PUBLISH):
        parsed = parse_target(json.loads(target_json(target)))
        assert type(parsed) is type(target) and parsed == target


def test_a_target_job_runs_the_proxy_shipped_with_runonce():
    assert job("x", ETL).source_dir == FUNCTIONS_DIR / "proxy"
    assert find_problems([TEAM]) == []


def test_one_proxy_per_target_and_jobs_naming_one_target_share_it(synth):
    functions = synth.resources("google_cloudfunctions2_function")
    assert sorted(config["name"] for config in functions.values()) == [
        "acme-etl-nightly",
        "acme-export",
        "acme-publish",
        "acme-release",
        "acme-watchdog",
    ]
    for config in functions.values():
        assert config["build_config"]["entry_point"] == "handle"
        assert config["service_config"]["ingress_settings"] == "ALLOW_INTERNAL_ONLY"
    name, _ = proxy(synth, ETL)
    uri = f"${{google_cloudfunctions2_function.{name}.service_config[0].uri}}"
    calling = sorted(
        config["name"]
        for config in fields(synth, "google_cloud_scheduler_job")
        if config["http_target"]["uri"] == uri
    )
    assert calling == ["acme-etl-again", "acme-etl-nightly"]
    assert usage(TEAM)["service_accounts"] == 2 + 4 + 1  # the watchdog's too


def test_each_proxy_account_gets_its_targets_role_on_the_narrowest_resource(synth):
    grants = {
        (kind, config["role"], config.get("project"), config.get("name"), config["member"])
        for kind in ("google_project_iam_member", "google_cloud_run_v2_job_iam_member")
        for config in synth.resources(kind).values()
        if config["role"] not in ("roles/datastore.user", "roles/datastore.viewer")
        and "build" not in config["member"]
    }
    assert grants == {
        (
            "google_project_iam_member",
            "roles/workflows.invoker",
            P,
            None,
            runtime_member(proxy(synth, ETL)[1]),
        ),
        (
            "google_cloud_run_v2_job_iam_member",
            "roles/run.jobsExecutorWithOverrides",
            P,
            "export",
            runtime_member(proxy(synth, EXPORT)[1]),
        ),
        (
            "google_project_iam_member",
            "roles/cloudbuild.builds.editor",
            P,
            None,
            runtime_member(proxy(synth, RELEASE)[1]),
        ),
        (
            "google_project_iam_member",
            "roles/pubsub.publisher",
            P,
            None,
            runtime_member(proxy(synth, PUBLISH)[1]),
        ),
    }
    (runner,) = fields(synth, "google_cloud_run_v2_job_iam_member")
    assert runner["location"] == "europe-west1"
    # Settled before the proxies exist: a 403 on the first run would be recorded as a failure.
    settled = synth.resources("time_sleep")["iam-settled"]["depends_on"]
    target_grants = [
        f"{kind}.{name}"
        for kind in ("google_project_iam_member", "google_cloud_run_v2_job_iam_member")
        for name in synth.resources(kind)
        if name.endswith(("-target-starter", "-target-runner"))
    ]
    assert len(target_grants) == 4 and set(target_grants) <= set(settled)


def test_the_apis_the_proxies_call_are_enabled(synth):
    services = {config["service"] for config in fields(synth, "google_project_service")}
    assert {"workflowexecutions.googleapis.com", "pubsub.googleapis.com", "run.googleapis.com"} <= services


def test_the_stack_with_targets_passes_the_pack(synth):
    assert [(f.rule.id, f.resource.path) for f in check_stack("acme", synth.document)] == []


def flagged(document: dict) -> set[tuple[str, str]]:
    return {(finding.rule.id, finding.resource.path) for finding in check_stack("acme", document)}


def test_a_proxy_holding_more_than_its_target_is_flagged(synth):
    stack = json.loads(synth.json)
    member = runtime_member(proxy(synth, ETL)[1])
    stack["resource"]["google_project_iam_member"]["etl-extra"] = {
        "project": P,
        "role": "roles/cloudbuild.builds.editor",
        "member": member,
    }
    assert ("RO-IAM-8", "google_project_iam_member.etl-extra") in flagged(stack)
    assert ("RO-IAM-3", "google_project_iam_member.etl-extra") in flagged(stack)


def test_a_proxy_without_its_grant_or_with_it_on_another_job_is_flagged(synth):
    stack = json.loads(synth.json)
    (name,) = stack["resource"]["google_cloud_run_v2_job_iam_member"]
    stack["resource"]["google_cloud_run_v2_job_iam_member"][name]["name"] = "other-job"
    function, _ = proxy(synth, EXPORT)
    assert flagged(stack) == {
        ("RO-IAM-8", f"google_cloud_run_v2_job_iam_member.{name}"),
        ("RO-IAM-8", f"google_cloudfunctions2_function.{function}"),
    }


def test_a_target_role_granted_to_an_account_that_is_no_proxy_is_not_scoped(synth):
    stack = json.loads(synth.json)
    stack["resource"]["google_project_iam_member"]["invoke-any-workflow"] = {
        "project": P,
        "role": "roles/workflows.invoker",
        "member": "serviceAccount:${google_service_account.team-build-account.email}",
    }
    assert flagged(stack) == {("RO-IAM-3", "google_project_iam_member.invoke-any-workflow")}


@pytest.mark.parametrize(
    ("target", "field"),
    [
        (Workflow("etl"), "target.workflow"),
        (CloudRunJob("projects/p/jobs/j"), "target.job"),
        (BuildTrigger(RELEASE.trigger, {"ENV": "prod"}), "target.substitutions"),
        (BuildTrigger("triggers/t"), "target.trigger"),
        (GoogleApi("POST", "http://pubsub.googleapis.com/v1/x", "roles/pubsub.publisher"), "target.url"),
        (GoogleApi("POST", "https://example.com/v1/x", "roles/pubsub.publisher"), "target.url"),
        (GoogleApi("POST", "https://pubsub.googleapis.com.evil.example/v1/x", "roles/x"), "target.url"),
        (GoogleApi("FETCH", PUBLISH.url, "roles/pubsub.publisher"), "target.method"),
        (GoogleApi("POST", PUBLISH.url, "pubsub.publisher"), "target.role"),
        (Workflow(ETL.workflow, {"when": object()}), "target.argument"),
    ],
)
def test_a_target_that_cannot_be_started_is_named(target, field):
    team = replace(TEAM, jobs=[job("x", target)])
    assert [(p.job, p.field) for p in find_problems([team])] == [("x", field)]


@pytest.mark.parametrize(
    "target",
    [
        Workflow("etl"),
        CloudRunJob("projects/p/jobs/j"),
        BuildTrigger(RELEASE.trigger, {"ENV": "prod"}),
        GoogleApi("POST", "https://example.com/v1/x", "roles/pubsub.publisher"),
        GoogleApi("FETCH", PUBLISH.url, "roles/pubsub.publisher"),
    ],
)
def test_the_stack_and_the_proxy_refuse_a_target_with_the_same_words(target):
    # Validated once: the stack reports what the proxy would raise at run time, before any deploy.
    (problem,) = [p for p in find_problems([replace(TEAM, jobs=[job("x", target)])])]
    with pytest.raises(ConfigError) as raised:
        parse_target(json.loads(target_json(target)))
    assert str(raised.value) == f"RUNONCE_TARGET: {problem.message}; {problem.fix}"


@pytest.mark.parametrize(
    ("changes", "field"),
    [
        ({"source": "report"}, "target"),
        ({"entry_point": "main"}, "entry_point"),
        ({"body": '{"day": 1}'}, "body"),
        ({"attempt_deadline_seconds": 60}, "attempt_deadline_seconds"),
        ({"env": {"RUNONCE_TARGET": "{}"}}, "env"),
        ({"env": {"RUNONCE_TARGET_BASE_URL": "http://localhost:1"}}, "env"),
        ({"env": {"RUNONCE_TARGET_TIMEOUT_SECONDS": "soon"}}, "env"),
    ],
)
def test_a_target_job_must_fit_the_proxy(changes, field):
    team = replace(TEAM, jobs=[job("x", ETL, **changes)])
    assert (("x", field)) in [(p.job, p.field) for p in find_problems([team])]


def test_the_attempt_deadline_covers_the_proxys_calls_and_says_how_to_fit():
    (problem,) = find_problems([replace(TEAM, jobs=[job("x", ETL, attempt_deadline_seconds=60)])])
    assert "up to 3 calls to the API" in problem.message and "30 s each, 90 s" in problem.message
    assert problem.fix.startswith("set attempt_deadline_seconds (and timeout_seconds) to at least 90")
    shorter = job("x", ETL, attempt_deadline_seconds=60, env={"RUNONCE_TARGET_TIMEOUT_SECONDS": "20"})
    assert find_problems([replace(TEAM, jobs=[shorter])]) == []


needs_checkov = pytest.mark.skipif(
    not CHECKOV.exists(), reason=f"checkov is not installed at {CHECKOV}: `make test` installs it"
)
TRIGGER_GRANT = "release-identity-target-starter"


def checkov_findings(stack: dict, tmp_path) -> list[tuple[str, str]]:
    file = tmp_path / "acme.tf.json"
    file.write_text(json.dumps(stack))
    return [(f.check_id, f.resource) for f in run_checkov(CHECKOV, "acme", file)]


@needs_checkov
def test_checkov_accepts_the_build_trigger_grant_and_the_stack_passes(synth, tmp_path):
    # Running a trigger needs cloudbuild.builds.create, which checkov's CKV_GCP_49 reports at
    # project level; no narrower grant exists, so the runner accepts it on this exact grant
    # (policy/checkov.py ACCEPTED, docs/targets.md "The stacks").
    grant = synth.resources("google_project_iam_member")[TRIGGER_GRANT]
    assert (grant["role"], grant["project"]) == ("roles/cloudbuild.builds.editor", P)
    assert checkov_findings(json.loads(synth.json), tmp_path) == []


@pytest.mark.parametrize(
    ("change", "checks"),
    [
        # The same role for an account that runs no trigger proxy (the team's invoker).
        (
            lambda grant: grant.update(
                member="serviceAccount:${google_service_account.team-invoker-account.email}"
            ),
            ["CKV_GCP_49"],
        ),
        # On another project than the trigger's.
        (lambda grant: grant.update(project="acme-other-project"), ["CKV_GCP_49"]),
        # Another impersonating role for the proxy, on the project (CKV_GCP_41 names that one too).
        (lambda grant: grant.update(role="roles/iam.serviceAccountUser"), ["CKV_GCP_41", "CKV_GCP_49"]),
    ],
    ids=["other-account", "other-project", "other-role"],
)
@needs_checkov
def test_checkov_still_fails_anything_but_that_exact_grant(synth, tmp_path, change, checks):
    stack = json.loads(synth.json)
    change(stack["resource"]["google_project_iam_member"][TRIGGER_GRANT])
    assert sorted(checkov_findings(stack, tmp_path)) == [
        (check, f"resource.{TRIGGER_GRANT}") for check in checks
    ]


@needs_checkov
def test_checkov_still_fails_a_second_build_editor_grant_beside_the_accepted_one(synth, tmp_path):
    stack = json.loads(synth.json)
    grants = stack["resource"]["google_project_iam_member"]
    grants["builds-anything"] = {**grants[TRIGGER_GRANT], "member": "user:someone@example.com"}
    assert checkov_findings(stack, tmp_path) == [("CKV_GCP_49", "resource.builds-anything")]


def test_only_the_listed_grants_are_accepted_and_every_accepted_check_says_why():
    assert set(ACCEPTED) == {"CKV_GCP_49"}
    assert all(len(reason) > 40 for reason, _ in ACCEPTED.values())
    assert not set(ACCEPTED) & set(SKIPPED)  # accepted on one grant, never skipped everywhere


def test_a_grace_longer_than_the_lease_is_named_with_its_fix():
    """The proxy holds a run of unknown start for the grace: longer than the lease (timeout 120 +
    60 s) and the held claim outlasts what any attempt may hold."""
    late = job("x", ETL, env={"RUNONCE_TARGET_GRACE_SECONDS": "181"})
    (problem,) = find_problems([replace(TEAM, jobs=[late])])
    assert (problem.team, problem.job, problem.field) == ("acme", "x", "env")
    assert (
        "grace (181 s, RUNONCE_TARGET_GRACE_SECONDS=181) is longer than the lease (180 s)" in problem.message
    )
    assert problem.fix.startswith(
        "lower RUNONCE_TARGET_GRACE_SECONDS (or RUNONCE_TARGET_TIMEOUT_SECONDS) to at most 180 s"
    )
    assert (
        find_problems([replace(TEAM, jobs=[job("x", ETL, env={"RUNONCE_TARGET_GRACE_SECONDS": "180"})])])
        == []
    )


@pytest.mark.parametrize(
    ("changes", "says"),
    [
        ({"retry": Retry(retry_count=0)}, "no retry comes before the next run"),
        # retries at 30 and 90 s; the default grace is the 30 s call timeout + 60 s = 90 s
        ({"retry": Retry(retry_count=2, min_backoff_seconds=30)}, "the last retry comes 90 s after"),
        # a longer call timeout lengthens the default grace past the retries at 30, 90 and 210 s
        (
            {
                "env": {"RUNONCE_TARGET_TIMEOUT_SECONDS": "33"},
                "attempt_deadline_seconds": 100,
                "timeout_seconds": 300,
            },
            "(93 s, the call timeout (33 s) + 60 s)",
        ),
    ],
)
def test_a_retry_window_that_ends_within_the_grace_is_named(changes, says):
    """With next_run_catches_up no retry need come after the lease, but a held run is finished
    only by a retry after the grace."""
    changed = job("x", ETL, next_run_catches_up=True, **changes)
    if "timeout_seconds" in changes:  # retries at 30, 60: none after a 93 s grace
        changed = replace(changed, retry=Retry(retry_count=2, min_backoff_seconds=30, max_doublings=0))
    (problem,) = find_problems([replace(TEAM, jobs=[changed])])
    assert (problem.job, problem.field) == ("x", "retry")
    assert says in problem.message and "only a retry after the grace looks for the start" in problem.message
    assert problem.fix.startswith("make a retry come later than")


def test_a_grace_that_is_not_a_number_is_named():
    bad = job("x", ETL, env={"RUNONCE_TARGET_GRACE_SECONDS": "soon"})
    assert [(p.job, p.field) for p in find_problems([replace(TEAM, jobs=[bad])])] == [("x", "env")]
