"""Broken team files: every problem of every file is reported, each naming its file, and synth
(`python -O main.py`) exits 1 without a traceback. Also `make deploy STACK=...` name resolution."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from stacks.config.team_files import read_team_file, read_team_folder
from stacks.stack_names import resolve_stack
from stacks.team import REPO_ROOT
from stacks.validate import find_problems

GOOD = """
from stacks.team import Job, Retry, Team

team = Team(
    name="{name}",
    project="{project}",
    region="europe-west1",
    jobs=[Job(name="{job}", schedule="0 3 * * *", source="report")],
    alert_emails=["oncall@example.com"],
)
"""


def write(folder: Path, file: str, text: str) -> Path:
    """A team file in the folder."""
    path = folder / file
    path.write_text(text)
    return path


def good(name: str = "orders", job: str = "export", project: str = "acme-prod-1") -> str:
    """A valid team file's text."""
    return GOOD.format(name=name, job=job, project=project)


def read(tmp_path: Path, text: str):
    """(team, problems) of one team file with this text."""
    return read_team_file(write(tmp_path, "orders.py", text))


def test_the_shipped_team_folder_reads_and_validates_without_problems():
    folder = read_team_folder()
    assert folder.problems == []
    assert [file.shown for file in folder.files] == [
        "teams/example.py",
        "teams/ledger.py",
        "teams/payments.py",
    ]
    assert find_problems(folder.teams, [file.shown for file in folder.files]) == []


def test_a_good_file_loads_without_problems(tmp_path):
    team, problems = read(tmp_path, good())
    assert problems == [] and team is not None and team.name == "orders"


def test_a_misspelt_job_field_is_named_with_team_job_line_and_the_right_spelling(tmp_path):
    team, (problem,) = read(tmp_path, good().replace("schedule=", "shedule="))
    assert team is None
    assert (problem.team, problem.job, problem.field, problem.line) == ("orders", "export", "shedule", 8)
    assert problem.message == "Job has no field 'shedule'"
    assert problem.fix == "write schedule= instead"
    assert str(problem).startswith(f"{problem.file}:8: team 'orders', job 'export', field shedule:")


def test_misspelt_team_and_retry_fields_are_all_reported_at_once(tmp_path):
    text = (
        good()
        .replace('region="', 'regoin="')
        .replace('source="report"', 'source="report", retry=Retry(retry_cout=2)')
    )
    _, problems = read(tmp_path, text)
    assert [(p.job, p.field, p.fix) for p in problems] == [
        (None, "regoin", "write region= instead"),
        ("export", "retry.retry_cout", "write retry_count= instead"),
    ]


def test_a_missing_required_field_is_named(tmp_path):
    _, (problem,) = read(tmp_path, good().replace(', schedule="0 3 * * *"', ""))
    assert (problem.team, problem.job, problem.field) == ("orders", "export", "schedule")
    assert "needs schedule" in problem.message and problem.fix.startswith("add schedule=")


def test_a_job_without_source_or_target_loads_and_is_told_to_name_one(tmp_path):
    team, problems = read(tmp_path, good().replace(', source="report"', ""))
    assert problems == []
    (problem,) = find_problems([team])
    assert (problem.job, problem.field) == ("export", "source")
    assert "neither source" in problem.message and "target=Workflow(...)" in problem.fix


def test_misspelt_and_mistyped_target_fields_are_named_with_the_target_prefix(tmp_path):
    text = (
        good()
        .replace(
            'source="report"',
            'target=Workflow(workflw="projects/p/locations/europe-west1/workflows/w")',
        )
        .replace("import Job, Retry, Team", "import Job, Retry, Team\nfrom stacks.targets import Workflow")
    )
    _, (problem,) = read(tmp_path, text)
    assert (problem.job, problem.field, problem.fix) == (
        "export",
        "target.workflw",
        "write workflow= instead",
    )
    text = (
        good()
        .replace('source="report"', "target=Workflow(workflow=42)")
        .replace("import Job, Retry, Team", "import Job, Retry, Team\nfrom stacks.targets import Workflow")
    )
    _, (problem,) = read(tmp_path, text)
    assert (problem.job, problem.field) == ("export", "target.workflow")


@pytest.mark.parametrize(
    ("change", "field", "fix"),
    [
        (
            'source="report", timeout_seconds="300"',
            "timeout_seconds",
            "write timeout_seconds=300 (a number, without quotes)",
        ),
        ('source="report", memory=512', "memory", "give memory a string"),
        ('source="report", retry=Retry(retry_count=2.0)', "retry.retry_count", "write retry_count=2"),
        (
            'source="report", next_run_catches_up="yes"',
            "next_run_catches_up",
            "give next_run_catches_up True or False",
        ),
        (
            'source="report", env={"MODE": 1}',
            "env",
            'write env={"key": "value"} with strings on both sides (numbers in quotes)',
        ),
        ('source="report", timeout_seconds=True', "timeout_seconds", "give timeout_seconds a whole number"),
    ],
)
def test_a_value_of_the_wrong_type_is_named_with_its_fix(tmp_path, change, field, fix):
    team, (problem,) = read(tmp_path, good().replace('source="report"', change))
    assert team is None
    assert (problem.team, problem.job, problem.field, problem.fix) == ("orders", "export", field, fix)
    assert "must be" in problem.message


def test_a_job_that_is_not_a_job_is_named(tmp_path):
    _, (problem,) = read(tmp_path, good().replace("jobs=[", 'jobs=[{"name": "x"}, '))
    assert (problem.team, problem.field, problem.message) == ("orders", "jobs[0]", "is a dict, not a Job")


def test_a_syntax_error_names_the_file_and_line(tmp_path):
    _, (problem,) = read(tmp_path, good().replace("jobs=[", "jobs=[[", 1))
    assert problem.field == "file" and problem.line is not None and "does not parse" in problem.message
    assert problem.file.endswith("orders.py") and problem.fix == "fix the syntax at that line"


def test_an_exception_in_a_team_file_names_its_line_and_message_not_a_traceback(tmp_path):
    _, (problem,) = read(tmp_path, "import os\n\nLIMIT = int(os.environ['NO_SUCH_VARIABLE_X'])\n")
    assert (problem.field, problem.line) == ("file", 3)
    assert problem.message == "raised KeyError: 'NO_SUCH_VARIABLE_X'"
    assert "other team files were still checked" in problem.fix


def test_a_file_without_team_says_so(tmp_path):
    _, (problem,) = read(tmp_path, "from stacks.team import Team\n\nteams = []\n")
    assert (problem.field, problem.message) == ("team", "the file defines no `team`")
    assert "team = Team(...)" in problem.fix
    _, (problem,) = read(tmp_path, "team = 'orders'\n")
    assert problem.message == "the file defines `team` as a str, not a Team"


def test_one_broken_file_does_not_stop_the_others_from_being_read(tmp_path):
    write(tmp_path, "a_broken.py", "team = (\n")
    write(tmp_path, "b_raises.py", "raise SystemExit(3)\n")
    write(tmp_path, "c_good.py", good())
    write(tmp_path, "_ignored.py", "this is not python")
    folder = read_team_folder(tmp_path)
    assert [file.team.name for file in folder.files] == ["orders"]
    assert [Path(p.file).name for p in folder.problems] == ["a_broken.py", "b_raises.py"]


def synth(folder: Path) -> subprocess.CompletedProcess[str]:
    """`python -O main.py` (what `make synth` runs) on a folder of team files."""
    env = {
        **os.environ,
        "RUNONCE_TEAMS_DIR": str(folder),
        "PYTHONPATH": f"{REPO_ROOT}{os.pathsep}{REPO_ROOT / 'functions'}",
    }
    # Run from the teams folder's parent: if a check ever let a file through, its stack would be
    # written there, not into the repository's cdktf.out.
    return subprocess.run(
        [sys.executable, "-O", str(REPO_ROOT / "main.py")],
        cwd=folder.parent,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_synth_reports_every_problem_of_every_file_and_exits_1_without_a_traceback(tmp_path):
    write(tmp_path, "broken.py", "team = (\n")
    write(tmp_path, "misspelt.py", good(name="billing").replace("schedule=", "shedule="))
    write(tmp_path, "orders.py", good(job="nightly-export"))
    write(tmp_path, "orders_nightly.py", good(name="orders-nightly", job="export"))
    write(tmp_path, "typed.py", good(name="typed").replace('source="report"', 'source="report", memory=512'))
    result = synth(tmp_path)
    assert result.returncode == 1
    assert "Traceback" not in result.stderr
    lines = result.stderr.splitlines()
    assert lines[0].endswith("problem(s) in the team config:")
    for file in ("broken.py", "misspelt.py", "orders_nightly.py", "typed.py"):
        assert any(file in line for line in lines), file
    assert any("team 'orders-nightly', job 'export'" in line and "orders.py" in line for line in lines)
    assert all(" Fix: " in line for line in lines[1:])


def test_synth_reports_a_missing_teams_folder_without_a_traceback(tmp_path):
    result = synth(tmp_path / "nowhere")
    assert result.returncode == 1 and "Traceback" not in result.stderr
    assert "the teams folder does not exist" in result.stderr


def test_a_stack_is_found_by_team_name_or_by_its_file(tmp_path):
    write(tmp_path, "orders.py", good(name="orders-eu"))
    assert resolve_stack("orders-eu", tmp_path).stack == "orders-eu"
    for given in ("orders.py", "teams/orders.py", "teams/orders", "orders"):
        resolved = resolve_stack(given, tmp_path)
        assert resolved.stack == "orders-eu"
        assert "its stack is 'orders-eu'" in resolved.note


def test_an_unknown_stack_lists_the_known_ones(tmp_path):
    write(tmp_path, "orders.py", good())
    write(tmp_path, "billing.py", good(name="billing"))
    resolved = resolve_stack("order", tmp_path)
    assert resolved.stack is None
    assert resolved.note.endswith(
        "Known stacks: billing ("
        + str(tmp_path / "billing.py")
        + "), orders ("
        + str(tmp_path / "orders.py")
        + ")"
    )


def test_the_template_and_a_name_two_files_share_are_refused(tmp_path):
    write(tmp_path, "_template.py", good(name="my-team"))
    write(tmp_path, "a.py", good())
    write(tmp_path, "b.py", good())
    assert "not deployed" in resolve_stack("_template.py", tmp_path).note
    resolved = resolve_stack("orders", tmp_path)
    assert resolved.stack is None and "2 team files define stack 'orders'" in resolved.note
    assert "a.py" in resolved.note and "b.py" in resolved.note


def test_the_stack_name_command_prints_the_stack_or_exits_2(tmp_path):
    write(tmp_path, "orders.py", good(name="orders-eu"))
    env = {**os.environ, "RUNONCE_TEAMS_DIR": str(tmp_path), "PYTHONPATH": str(REPO_ROOT)}
    run = [sys.executable, "-m", "stacks.stack_names"]
    found = subprocess.run([*run, "teams/orders.py"], env=env, capture_output=True, text=True, cwd=REPO_ROOT)
    assert (found.returncode, found.stdout) == (0, "orders-eu\n")
    assert "its stack is 'orders-eu'" in found.stderr
    missing = subprocess.run([*run, "nope"], env=env, capture_output=True, text=True, cwd=REPO_ROOT)
    assert (missing.returncode, missing.stdout) == (2, "")
    assert "Known stacks: orders-eu" in missing.stderr


HANDLER = "import functions_framework\nfrom runonce import deduplicated\n\n{body}\n"
REQUIREMENTS = "functions-framework==3.10.2\ngoogle-cloud-firestore==2.34.1\n"


def job_with(change: str) -> str:
    """The good team file with its job's `source="report"` replaced by `change`."""
    return good().replace('source="report"', change)


MISTAKES = {
    "misspelt field": (
        job_with('source="report", timout_seconds=60'),
        "export",
        "timout_seconds",
        "timeout_seconds=",
    ),
    "wrong type": (
        job_with('source="report", timeout_seconds="300"'),
        "export",
        "timeout_seconds",
        "without quotes",
    ),
    "region typo": (good().replace("europe-west1", "europe-west-1"), None, "region", "'europe-west1'"),
    "Firestore location typo": (
        good().replace("jobs=[", 'database_location="eur4", jobs=['),
        None,
        "database_location",
        "'eur3'",
    ),
    "cron L": (good().replace("0 3 * * *", "0 3 L * *"), "export", "schedule", "use only numbers"),
    "cron W": (good().replace("0 3 * * *", "0 3 15W * *"), "export", "schedule", "use only numbers"),
    "cron #": (good().replace("0 3 * * *", "0 3 * * 1#2"), "export", "schedule", "use only numbers"),
    "cron ?": (good().replace("0 3 * * *", "0 3 ? * MON"), "export", "schedule", "use only numbers"),
    "never fires": (good().replace("0 3 * * *", "0 3 31 2 *"), "export", "schedule", "a day that exists"),
    "runtime": (job_with('source="report", runtime="python39"'), "export", "runtime", "python312"),
    "memory": (job_with('source="report", memory="3Gi"'), "export", "memory", "4Gi"),
    "reserved env": (
        job_with('source="report", env={"K_SERVICE": "x"}'),
        "export",
        "env",
        "rename K_SERVICE",
    ),
    "goog- label": (
        job_with('source="report", labels={"goog-owner": "x"}'),
        "export",
        "labels",
        "rename the label",
    ),
    "label key": (
        job_with('source="report", labels={"Owner": "x"}'),
        "export",
        "labels",
        "keys starting with a letter",
    ),
    "label count": (
        good().replace("jobs=[", "labels={f'l{n}': 'x' for n in range(62)}, jobs=["),
        None,
        "labels",
        "keep at most 61 labels",
    ),
    "placeholder": (good(project="my-gcp-project"), None, "project", "your own GCP project id"),
    "zero timeout": (
        job_with('source="report", timeout_seconds=0'),
        "export",
        "timeout_seconds",
        "choose 180-3600 s",
    ),
    "retries reach the next run": (
        good().replace("0 3 * * *", "*/15 * * * *"),
        "export",
        "retry",
        "retries_may_skip_next_run=True",
    ),
    "not deduplicated": (
        job_with('source="{fn}"'),
        "export",
        "entry_point",
        "decorate it with @deduplicated",
    ),
    "async job": (job_with('source="{fn}"'), "export", "entry_point", "plain `def`"),
    "missing requirement": (job_with('source="{fn}"'), "export", "source", "google-cloud-storage"),
}
HANDLERS = {
    "not deduplicated": "def handle(request):\n    return {}",
    "async job": "@deduplicated\nasync def handle(request):\n    return {}",
    "missing requirement": "from google.cloud import storage\n\n@deduplicated\ndef handle(r):\n    return 1",
}


@pytest.mark.parametrize("mistake", MISTAKES)
def test_synth_reports_each_mistake_with_team_job_field_and_fix_and_no_traceback(tmp_path, mistake):
    text, job, field, fix = MISTAKES[mistake]
    if mistake in HANDLERS:
        function = tmp_path / "fn"
        function.mkdir()
        (function / "main.py").write_text(HANDLER.format(body=HANDLERS[mistake]))
        (function / "requirements.txt").write_text(REQUIREMENTS)
        text = text.replace("{fn}", str(function))
    teams = tmp_path / "teams"
    teams.mkdir()
    write(teams, "orders.py", text)
    result = synth(teams)
    assert result.returncode == 1
    assert "Traceback" not in result.stderr
    where = "team 'orders', " + (f"job {job!r}, " if job else "") + f"field {field}: "
    lines = [line for line in result.stderr.splitlines() if where in line]
    assert lines, result.stderr
    assert any(f"{teams / 'orders.py'}" in line and " Fix: " in line and fix in line for line in lines), lines


def test_synth_names_both_teams_and_files_when_their_names_collide(tmp_path):
    write(tmp_path, "orders.py", good(job="nightly-export"))
    write(tmp_path, "orders_nightly.py", good(name="orders-nightly", job="export"))
    write(tmp_path, "orders_copy.py", good(job="other"))
    result = synth(tmp_path)
    assert result.returncode == 1 and "Traceback" not in result.stderr
    assert (
        f"2 team files use this name ({tmp_path / 'orders.py'}, {tmp_path / 'orders_copy.py'})"
        in result.stderr
    )
    collision = next(
        line for line in result.stderr.splitlines() if "function 'orders-nightly-export'" in line
    )
    assert "team 'orders-nightly', job 'export', field name:" in collision
    assert f"team 'orders' job 'nightly-export' ({tmp_path / 'orders.py'})" in collision
