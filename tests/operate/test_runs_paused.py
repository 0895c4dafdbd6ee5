"""`runonce runs` and `show` say when a job is paused, since when, by whom and why (operate/paused.py).

Black box: the team's `report` job fails three scheduled runs in a row through real deliveries,
the watchdog's own check (with functions/watchdog/main.py's Scheduler client) pauses it through
the Google APIs stand-in and records the pause in its own store, and the operator runs `runonce
runs` and `show` as printed. On the Firestore emulator and on Valkey. Every other answer of
`jobs.get` (404, 403, no answer, DISABLED, UPDATE_FAILED) is one line, and the runs are listed.
"""

from __future__ import annotations

import importlib.util
import json
import re
import shlex
from datetime import timedelta
from pathlib import Path

import pytest

from emulator.googleapis import Fault
from operate import cli, clients
from operate.paused import BY_UPDATE, BY_WATCHDOG
from operate.rerun import SCHEDULER_URL_VARIABLE
from runonce import PermanentError
from runonce.core.errors import StoreUnavailable
from runonce.scheduler.watchdog import Watch, WatchedJob, check
from stacks import naming
from tests.conftest import SCHEDULED
from tests.operate.conftest import LEASE, ON_BOTH_STORES, team_ledgers

FAILED_AT = [SCHEDULED + timedelta(minutes=minutes) for minutes in (0, 10, 20)]
TICK = SCHEDULED + timedelta(minutes=25)
"""The watchdog's tick that pauses the job: the three runs are past their grace (4 minutes)."""
PAUSED_SINCE = "2026-11-29T03:25:00Z"
_MAIN = Path(__file__).resolve().parents[2] / "functions" / "watchdog" / "main.py"


@pytest.fixture(params=ON_BOTH_STORES)
def ledger_kind(request) -> str:
    return request.param


def _watchdog_main():
    spec = importlib.util.spec_from_file_location("runonce_watchdog_main", _MAIN)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def revoked() -> object:
    raise PermanentError("the credential was revoked")


def job_name(ops, job: str = "report") -> str:
    scheduled = ops.team.job(job)
    return f"projects/{ops.team.project}/locations/{scheduled.location}/jobs/{scheduled.scheduler_job}"


def set_state(ops, state: str, updated: str = "2026-11-29T02:00:00Z", job: str = "report") -> None:
    """The Scheduler job in `state` (as a `gcloud scheduler jobs pause` would leave it, or Scheduler)."""
    [found] = [each for each in ops.api.resources("jobs") if each["name"] == job_name(ops, job)]
    ops.api._store({**found, "state": state, "userUpdateTime": updated})


def scheduler_state(ops, job: str = "report") -> str:
    [found] = [each for each in ops.api.resources("jobs") if each["name"] == job_name(ops, job)]
    return found["state"]


def paused_by_the_watchdog(served, clock, request, monkeypatch) -> list[str]:
    """Three failed runs of `report`, then the watchdog's tick that pauses it; their run keys."""
    ops = served.ops
    served.behaviour = revoked
    for moment in FAILED_AT:
        clock.current = moment + timedelta(seconds=5)
        assert served.deliver("report", moment)["status_code"] < 500
    clock.current = TICK
    served.api.clock = lambda: clock().strftime("%Y-%m-%dT%H:%M:%SZ")
    job = ops.team.job("report")
    watched = WatchedJob(
        job="report",
        scheduler_job=job.scheduler_job,
        schedule=job.schedule,
        time_zone=job.time_zone,
        grace=timedelta(minutes=4),
        lookback=timedelta(hours=2),
        since=SCHEDULED - timedelta(minutes=1),
        pause_after_failures=3,
    )
    own = team_ledgers(
        request.getfixturevalue("ledger_kind"),
        request,
        naming.watchdog_database(ops.team.database),
        naming.WATCHDOG_COLLECTION,
        monkeypatch,
        clock,
    )(LEASE)
    scheduler = _watchdog_main().SchedulerApi(served.api.url)
    summary = check(
        Watch(ops.team.name, ops.team.project, ops.team.region, (watched,)), ops.store, own, TICK, scheduler
    )
    assert summary["paused"] == 1 and scheduler_state(ops) == "PAUSED"
    return [ops.scheduled_key(moment) for moment in FAILED_AT]


def parsed(command: str) -> None:
    """Read `command` with the CLI's own parser, as tests/operate/test_show_next.py does."""
    words = shlex.split(command)
    assert words[0] == "runonce" and words[1] in cli.runonce.commands, command
    cli.runonce.commands[words[1]].make_context(words[1], words[2:])


def quoted_commands(text: str) -> list[str]:
    return re.findall(r"`(runonce [^`]+)`", text)


def listing(ops, *extra: str):
    answer = ops.run("runs", "--team", ops.team.name, "--since", "1h", *extra)
    assert answer.exit_code == 0, answer.output
    assert "Traceback" not in answer.output
    return answer


def json_rows(ops, *extra: str) -> list[dict]:
    answer = listing(ops, "--json", *extra)
    return [json.loads(line) for line in answer.stdout.splitlines()]


def test_runs_of_a_job_the_watchdog_paused_say_since_when_by_whom_and_why_above_the_listing(
    served, clock, request, monkeypatch
):
    keys = paused_by_the_watchdog(served, clock, request, monkeypatch)
    answer = listing(served.ops, "--job", "report")
    first, *rest = answer.stdout.splitlines()
    assert f"is PAUSED since {PAUSED_SINCE} by runonce-watchdog after 3 consecutive failed runs" in first
    assert "scheduled 2026-11-29T03:00:00Z to 2026-11-29T03:20:00Z" in first
    assert keys[-1][:12] in first
    [resume] = quoted_commands(first)
    assert resume == f"runonce resume --team {served.ops.team.name} --job report"
    parsed(resume)
    assert sum("failed" in line for line in rest) == 3  # the listing follows, its runs all there


def test_runs_json_carries_the_pause_as_fields_on_every_row_of_the_job(served, clock, request, monkeypatch):
    keys = paused_by_the_watchdog(served, clock, request, monkeypatch)
    rows = json_rows(served.ops, "--job", "report", "--status", "failed")
    assert [row["key"] for row in rows] == keys
    for row in rows:
        state = row["scheduler_job_state"]
        assert (state["state"], state["paused_since"], state["since_from"], state["paused_by"]) == (
            "PAUSED",
            PAUSED_SINCE,
            BY_WATCHDOG,
            "runonce-watchdog",
        )
        assert state["failed_runs"] == keys and state["unknown"] is None
        assert state["resume"] == f"runonce resume --team {served.ops.team.name} --job report"


def test_show_of_a_run_of_a_paused_job_says_so_and_its_first_step_resumes_it(
    served, clock, request, monkeypatch
):
    paused_by_the_watchdog(served, clock, request, monkeypatch)
    ops = served.ops
    show = ["show", "--team", ops.team.name, "--job", "report", "--time", "2026-11-29T03:10:00Z"]
    answer = ops.run(*show)
    assert answer.exit_code == 0, answer.output
    assert f"is PAUSED since {PAUSED_SINCE} by runonce-watchdog" in answer.stderr
    shown = json.loads(answer.stdout)
    assert shown["scheduler_job_state"]["since_from"] == BY_WATCHDOG
    resume = shown["next"][0]["command"]
    assert resume == f"runonce resume --team {ops.team.name} --job report"
    parsed(resume)
    resumed = ops.run(*shlex.split(resume)[1:], "--by", "alice")  # run as printed
    assert resumed.exit_code == 0, resumed.output
    again = ops.run(*show)
    assert again.exit_code == 0 and again.stderr == ""
    shown = json.loads(again.stdout)
    assert shown["scheduler_job_state"]["state"] == "ENABLED"
    assert all("runonce resume" not in (step["command"] or "") for step in shown["next"])


def test_a_resumed_job_says_nothing_and_a_pause_by_hand_after_it_is_not_the_watchdogs(
    served, clock, request, monkeypatch
):
    paused_by_the_watchdog(served, clock, request, monkeypatch)
    ops = served.ops
    assert ops.run("resume", "--team", ops.team.name, "--job", "report", "--by", "alice").exit_code == 0
    resumed = listing(ops, "--job", "report").stdout
    assert "PAUSED" not in resumed and resumed.lstrip().startswith("runs of team")  # resumed: nothing said
    set_state(ops, "PAUSED", "2026-11-29T03:50:00Z")  # `gcloud scheduler jobs pause`, later
    clock.current = SCHEDULED + timedelta(minutes=55)
    answer = listing(ops, "--job", "report")
    first = answer.stdout.splitlines()[0]
    assert "is PAUSED in Scheduler (no pause record of the watchdog matches it)" in first
    assert "last changed at 2026-11-29T03:50:00Z (its userUpdateTime" in first
    [state] = {json.dumps(row["scheduler_job_state"]) for row in json_rows(ops, "--job", "report")}
    state = json.loads(state)
    assert (state["paused_since"], state["since_from"], state["paused_by"]) == (
        "2026-11-29T03:50:00Z",
        BY_UPDATE,
        None,
    )


def test_a_team_listing_marks_each_paused_job_and_no_other(ops, clock):
    set_state(ops, "PAUSED", "2026-11-29T01:00:00Z", job="nightly")
    answer = listing(ops)
    marked = [line for line in answer.stdout.splitlines() if "is PAUSED" in line]
    assert len(marked) == 1 and marked[0].startswith("job nightly ")
    [resume] = quoted_commands(marked[0])
    parsed(resume)
    set_state(ops, "PAUSED", "2026-11-29T01:00:00Z", job="report")
    marked = [line for line in listing(ops).stdout.splitlines() if "is PAUSED" in line]
    assert sorted(line.split()[1] for line in marked) == ["nightly", "report"]


def _gone(ops, monkeypatch) -> None:
    ops.api.inject(Fault("fail", "GET", "/jobs/", status=404))


def _forbidden(ops, monkeypatch) -> None:
    ops.api.inject(Fault("fail", "GET", "/jobs/", status=403))


def _unreachable(ops, monkeypatch) -> None:
    url = ops.api.url
    ops.api.stop()
    monkeypatch.setenv(SCHEDULER_URL_VARIABLE, url)


def _not_json(ops, monkeypatch) -> None:
    ops.api.inject(Fault("answer", "GET", "/jobs/", status=200, body="<html>sign in</html>", commit=False))


def _disabled(ops, monkeypatch) -> None:
    set_state(ops, "DISABLED")


def _update_failed(ops, monkeypatch) -> None:
    set_state(ops, "UPDATE_FAILED")


@pytest.mark.parametrize(
    ("answer", "said"),
    [
        (_gone, "Cloud Scheduler has no such job (404: deleted, or not deployed)"),
        (_forbidden, "could not tell whether it is paused: no permission to read it (403;"),
        (_unreachable, "could not tell whether it is paused: Cloud Scheduler could not be reached"),
        (_not_json, "could not tell whether it is paused: Cloud Scheduler's answer is not JSON"),
        (_disabled, "is DISABLED: Scheduler disabled it after an error"),
        (_update_failed, "is UPDATE_FAILED: its last update failed"),
    ],
    ids=lambda value: getattr(value, "__name__", "")[1:],
)
def test_each_other_answer_of_jobs_get_is_one_line_and_the_runs_are_listed(
    ops, clock, monkeypatch, answer, said
):
    ops.store.fail(ops.claim_scheduled(SCHEDULED), "upstream said 400")
    answer(ops, monkeypatch)
    listed = listing(ops, "--job", "report", "--since", "5m")
    first, *rest = listed.stdout.splitlines()
    assert first.startswith("job report (Scheduler job ") and said in first, first
    assert [line for line in listed.stdout.splitlines() if "Scheduler" in line] == [first]
    assert any("upstream said 400" in line for line in rest), listed.stdout
    if answer in (_gone, _forbidden, _not_json):
        answer(ops, monkeypatch)
    [row] = json_rows(ops, "--job", "report", "--since", "5m")
    assert row["status"] == "failed" and row["scheduler_job_state"]["line"] == first


def test_a_watchdog_record_that_cannot_be_read_is_said_and_the_pause_still_shown(
    served, clock, request, monkeypatch
):
    paused_by_the_watchdog(served, clock, request, monkeypatch)

    def refused(team):  # the operators' grant on the watchdog's database missing, as Firestore says it
        raise StoreUnavailable("403 Missing or insufficient permissions.")

    monkeypatch.setattr(clients, "watchdog_store", refused)
    first = listing(served.ops, "--job", "report").stdout.splitlines()[0]
    assert "is PAUSED in Scheduler (the watchdog's record could not be read (StoreUnavailable: 403" in first
    assert f"last changed at {PAUSED_SINCE} (its userUpdateTime" in first
    [resume] = quoted_commands(first)
    parsed(resume)
    [state] = {row["scheduler_job_state"]["unknown"] for row in json_rows(served.ops, "--job", "report")}
    assert state.startswith("StoreUnavailable: 403")
