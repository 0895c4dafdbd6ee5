"""Every next step `runonce show` prints is one the tool accepts in that state.

For each state `show` can describe, the run is brought there through real deliveries (the job
under @deduplicated on the Firestore emulator, Scheduler's "Force run" carrying the job's next
scheduled time) or the verbs themselves, `show` is run, the commands are taken from its `next`,
and each is run, as printed, against the same ledger, subscription and Scheduler stand-in (gcloud
included, pointed at the stand-in): none may be refused.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import threading
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path

import pytest
from google.api_core import exceptions as gexc

import runonce as library
from operate import cli, replay
from runonce.contract import DEAD_LETTER_MESSAGE_ID_FIELD, DeadLetterReason
from runonce.core.event import Event
from runonce.core.store import Claim
from runonce.events.deadletter import DeadLetters
from tests.conftest import SCHEDULED
from tests.operate.conftest import LEASE, ON_BOTH_STORES, Ops, Served


@pytest.fixture(params=ON_BOTH_STORES)
def ledger_kind(request) -> str:
    """Every test here runs on a team on Firestore and on a team on Valkey."""
    return request.param


def _fail() -> object:
    raise library.PermanentError("upstream said 400")


def _show(ops: Ops, *how: str) -> list[dict]:
    result = ops.run("show", *how, "--team", ops.team.name)
    assert result.exit_code == 0, result.stderr
    return json.loads(result.stdout)["next"]


def _event(ops: Ops, request, dead_letter: bool = True) -> tuple[str, str]:
    """An event of `orders` failed permanently and (if `dead_letter`) dead-lettered as the library
    does; its run key and copy id."""
    topics = request.getfixturevalue("topics")
    job = ops.team.event_jobs[0]
    event = Event("m-1", job.push_subscription, SCHEDULED, {"order": "7"}, b'{"total": 12}')
    claim = ops.store.claim("event-run", {"event_kind": "pubsub", "event_source": job.push_subscription})
    assert isinstance(claim, Claim)
    if not dead_letter:
        return "event-run", ""
    ops.store.fail(claim, "order 7 is invalid")
    forwarded = DeadLetters(job.dead_letter_topic, topics.publisher).forward(
        event, DeadLetterReason.PERMANENT_FAILURE, "event-run", 1, "order 7 is invalid"
    )
    ops.store.annotate("event-run", {DEAD_LETTER_MESSAGE_ID_FIELD: forwarded.message_id})
    return "event-run", forwarded.message_id


def never_delivered(ops, served, clock, request):
    return ("--job", "report", "--time", "2026-11-29T02:40:00Z")


@dataclass
class Held:
    """The 03:00 run of `report`, delivered under an overlap policy while the 02:50 run held the job
    (its body blocked on a thread until `end`): the answer it got."""

    answer: dict
    release: threading.Event
    holder: threading.Thread

    def end(self) -> None:
        """Let the 02:50 run's body end (it completes)."""
        self.release.set()
        self.holder.join(30)


def _while_held(served: Served, overlap: str, request) -> Held:
    started, release = threading.Event(), threading.Event()

    def block() -> object:
        started.set()
        release.wait(30)
        return {"rows": 1}

    served.overlap, served.behaviour = overlap, block
    holder = threading.Thread(target=served.deliver, args=("report", SCHEDULED - timedelta(minutes=10)))
    holder.start()
    held = Held({}, release, holder)
    request.addfinalizer(held.end)
    assert started.wait(30), "the holder's body never started"
    served.behaviour = lambda: {"rows": 1}
    held.answer = served.deliver("report", SCHEDULED)
    return held


def waited_out(ops, served, clock, request):
    """A `wait` job's 03:00 run answered 409 while 02:50 held the job, which then completed; Scheduler's
    retries of 03:00 ran out (none came after), so it has a waiting note and no record."""
    held = _while_held(served, "wait", request)
    assert (held.answer["status_code"], held.answer["outcome"]) == (409, "waiting"), held.answer
    held.end()
    assert served.answers[-1]["outcome"] == "completed"
    return ("--job", "report", "--time", "2026-11-29T03:00:00Z")


def waited_out_while_the_run_before_still_holds_the_job(ops, served, clock, request):
    held = _while_held(served, "wait", request)
    assert (held.answer["status_code"], held.answer["outcome"]) == (409, "waiting"), held.answer
    return ("--job", "report", "--time", "2026-11-29T03:00:00Z")


def skipped_by_overlap(ops, served, clock, request):
    """A `skip` job's 03:00 run delivered while 02:50 held the job: recorded skipped, never run."""
    held = _while_held(served, "skip", request)
    held.end()
    assert (held.answer["status_code"], held.answer["outcome"]) == (200, "skipped"), held.answer
    return (held.answer["run_key"],)


def never_delivered_after_a_forced_run_of_the_interval(ops, served, clock, request):
    served.force("report")
    return ("--job", "report", "--time", "2026-11-29T02:40:00Z")


def in_progress(ops, served, clock, request):
    return (ops.claim_scheduled(SCHEDULED).key,)


def lease_ended(ops, served, clock, request):
    key = ops.claim_scheduled(SCHEDULED).key
    clock.advance(LEASE.total_seconds() + 5)
    return (key,)


def released(ops, served, clock, request):
    (key,) = lease_ended(ops, served, clock, request)
    assert ops.run("release", key, "--team", ops.team.name, "--by", "tester").exit_code == 0
    return (key,)


def completed(ops, served, clock, request):
    return (served.deliver("report", SCHEDULED)["run_key"],)


def failed(ops, served, clock, request):
    served.behaviour = _fail
    return (served.deliver("report", SCHEDULED)["run_key"],)


def forced_completed(ops, served, clock, request):
    return (served.force("report")["run_key"],)


def forced_failed_in_its_interval(ops, served, clock, request):
    served.behaviour = _fail
    return (served.force("report")["run_key"],)


def forced_failed_past_its_interval(ops, served, clock, request):
    served.behaviour = _fail
    key = served.force("report")["run_key"]
    served.behaviour = lambda: {"rows": 1}
    clock.current = SCHEDULED + timedelta(minutes=10, seconds=30)
    return (key,)


def rerun_delivery(ops, served, clock, request):
    served.behaviour = _fail
    served.deliver("report", SCHEDULED)
    served.behaviour = lambda: {"rows": 1}
    clock.advance(60)
    rerun = ops.run("rerun", "--team", ops.team.name, "--job", "report", "--time", "2026-11-29T03:00:00Z")
    assert rerun.exit_code == 0 and "delivered" in rerun.stdout, rerun.output
    return (served.answers[-1]["rerun_delivery"],)


def event_lease_ended(ops, served, clock, request):
    key, _ = _event(ops, request, dead_letter=False)
    clock.advance(LEASE.total_seconds() + 5)
    return (key,)


def dead_letter_copy_new(ops, served, clock, request):
    return (_event(ops, request)[0],)


def dead_letter_copy_replayed(ops, served, clock, request):
    key, copy_id = _event(ops, request)
    assert ops.run("replay", copy_id, "--team", ops.team.name, "--by", "tester").exit_code == 0
    return (key,)


def dead_letter_replay_unconfirmed(ops, served, clock, request):
    key, copy_id = _event(ops, request)

    def lost(*args, **kwargs):
        raise gexc.DeadlineExceeded("no answer")

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(replay, "publish", lost)
        assert ops.run("replay", copy_id, "--team", ops.team.name, "--by", "tester").exit_code == 1
    return (key,)


STATES: list[tuple[Callable[..., tuple[str, ...]], list[str]]] = [
    (never_delivered, ["backfill"]),
    (waited_out, ["backfill"]),
    (waited_out_while_the_run_before_still_holds_the_job, []),
    (never_delivered_after_a_forced_run_of_the_interval, []),
    (in_progress, []),
    (lease_ended, ["release", "rerun"]),
    (released, ["rerun"]),
    (completed, ["rerun"]),
    (failed, ["rerun"]),
    (skipped_by_overlap, ["rerun"]),
    (forced_completed, []),
    (forced_failed_in_its_interval, []),
    (forced_failed_past_its_interval, ["gcloud"]),
    (rerun_delivery, ["show"]),
    (event_lease_ended, ["release"]),
    (dead_letter_copy_new, ["replay"]),
    (dead_letter_copy_replayed, ["runs"]),
    (dead_letter_replay_unconfirmed, ["runs", "replay"]),
]


_VERBS = r"\b(runonce (show|runs|rerun|backfill|release|replay|dead-letters)|gcloud scheduler)\b"


def commands_in(text: str) -> list[str]:
    """The commands a text of `show` or `runs` names: each between backticks, none outside them."""
    assert not re.search(_VERBS, re.sub(r"`[^`]*`", "", text)), f"a command outside backticks: {text}"
    return [named for named in re.findall(r"`([^`]*)`", text) if named.split()[0] in ("runonce", "gcloud")]


def parsed(command: str) -> None:
    """Read `command` with the CLI's own parser (click raises on an unknown verb or option, a missing
    required option or a value of the wrong type); a gcloud command must name the job's location
    and project (running it is tested above, against the Scheduler stand-in)."""
    words = shlex.split(command)
    if words[0] == "gcloud":
        assert words[1:4] == ["scheduler", "jobs", "run"], command
        assert {word.split("=")[0] for word in words[5:]} == {"--location", "--project"}, command
        return
    assert words[0] == "runonce" and words[1] in cli.runonce.commands, command
    cli.runonce.commands[words[1]].make_context(words[1], words[2:])


def _verb(command: str) -> str:
    words = shlex.split(command)
    return words[0] if words[0] == "gcloud" else words[1]


@pytest.mark.parametrize(
    "state, verb",
    [(state, verb) for state, verbs in STATES for verb in verbs or [None]],
    ids=lambda value: getattr(value, "__name__", str(value)),
)
def test_every_command_show_suggests_is_accepted_in_that_state(
    ops, served, clock, request, monkeypatch, tmp_path, state, verb
):
    monkeypatch.setenv("USER", "tester")
    how = state(ops, served, clock, request)
    steps = _show(ops, *how)
    assert steps and all(step["why"] for step in steps)
    for step in steps:  # every command it names, run now or after a wait, is one the tool parses
        for named in [*commands_in(step["why"]), *([step["command"]] if step["command"] else [])]:
            parsed(named)
    commands = [step["command"] for step in steps if step["command"]]
    assert [_verb(command) for command in commands] == dict(STATES)[state]
    if verb is None:
        assert any(step["why"].startswith("wait") or "nothing to do" in step["why"] for step in steps), steps
        return
    [command] = [command for command in commands if _verb(command) == verb]
    if verb == "gcloud":
        before = len(served.answers)
        _gcloud(command, served, tmp_path)
        assert [answer["outcome"] for answer in served.answers[before:]] == ["completed"]
        assert served.runs[-1].forced is True
        return
    result = ops.run(*shlex.split(command)[1:])
    assert result.exit_code == 0, (command, result.output)
    if verb == "rerun":
        assert "delivered" in result.stdout
    if verb == "backfill":  # it started exactly the run shown, and the run completed
        assert ", 1 started," in result.stdout, result.stdout
        key = json.loads(ops.run("show", *how, "--team", ops.team.name).stdout)["key"]
        assert served.runs[-1].key == key
        record = ops.store.read(key)
        assert record is not None and (record["status"], record["cause"]) == ("completed", "backfill")


def _gcloud(command: str, served: Served, folder: Path) -> None:
    """Run a gcloud command as printed, against the Scheduler stand-in (an access token of its own)."""
    token = folder / "token"
    token.write_text("stand-in")
    env = {
        **os.environ,
        "CLOUDSDK_API_ENDPOINT_OVERRIDES_CLOUDSCHEDULER": served.api.url + "/",
        "CLOUDSDK_AUTH_ACCESS_TOKEN_FILE": str(token),
        "CLOUDSDK_CONFIG": str(folder / "gcloud"),
        "CLOUDSDK_CORE_DISABLE_USAGE_REPORTING": "true",
        "CLOUDSDK_COMPONENT_MANAGER_DISABLE_UPDATE_CHECK": "true",
        "CLOUDSDK_CORE_DISABLE_PROMPTS": "1",
    }
    run = subprocess.run(shlex.split(command), env=env, capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr


def test_show_of_a_waited_out_run_says_which_run_it_waited_for_since_when_and_when_its_note_expires(
    ops, served, clock, request
):
    how = waited_out(ops, served, clock, request)
    shown = json.loads(ops.run("show", *how, "--team", ops.team.name).stdout)
    holder = ops.scheduled_key(SCHEDULED - timedelta(minutes=10))
    assert (shown["status"], shown["record"]) == ("waited_out", None)
    expires = (clock.current + timedelta(days=7)).isoformat()  # one retention (the default) after the 409
    assert shown["waited_out"] == {
        "waiting_for": holder,
        "since": "2026-11-29T03:00:00Z",
        "note_expires": expires,
    }
    [step] = shown["next"]
    assert step["why"].startswith("waited out") and holder in step["why"]


def test_show_of_a_never_delivered_run_older_than_the_jobs_retention_warns_its_record_may_have_expired(
    ops, served, clock
):
    how = ("--job", "report", "--time", "2026-11-29T02:40:00Z")
    [recent] = _show(ops, *how)
    clock.advance(8 * 24 * 3600)  # past the job's 7 days
    [old] = _show(ops, *how)
    assert recent["command"] == old["command"] and old["command"].startswith("runonce backfill")
    assert "retention" not in recent["why"] and "older than the job's retention" in old["why"]


@pytest.mark.parametrize(
    "state",
    [lease_ended, rerun_delivery, skipped_by_overlap, waited_out, dead_letter_copy_new],
    ids=lambda state: state.__name__,
)
def test_every_command_runs_names_is_one_the_cli_parses(ops, served, clock, request, monkeypatch, state):
    monkeypatch.setenv("USER", "tester")
    state(ops, served, clock, request)
    listed = ops.run("runs", "--team", ops.team.name, "--since", "1h", "--json")
    assert listed.exit_code == 0, listed.output
    outcomes = [json.loads(line)["outcome"] for line in listed.stdout.splitlines()]
    named = [command for outcome in outcomes for command in commands_in(outcome)]
    for command in named:
        parsed(command)
    if state is not waited_out and state is not dead_letter_copy_new:  # each of these rows names `show`
        assert named, outcomes
