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
import shlex
import subprocess
import threading
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path

import pytest
from google.api_core import exceptions as gexc

import runonce as library
from operate import replay
from runonce.contract import DEAD_LETTER_MESSAGE_ID_FIELD, DeadLetterReason
from runonce.core.event import Event
from runonce.core.store import Claim
from runonce.events.deadletter import DeadLetters
from tests.conftest import SCHEDULED
from tests.operate.conftest import LEASE, Ops, Served


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


def _waiting(served: Served, holder_time, run_time) -> tuple[threading.Event, threading.Thread]:
    """Under overlap `wait`: the run at `holder_time` delivered on a thread, its body blocked until
    the event returned is set; then the run at `run_time` delivered, answered 409 waiting for it."""
    started, release = threading.Event(), threading.Event()

    def block() -> object:
        started.set()
        release.wait(30)
        return {"rows": 1}

    served.overlap, served.behaviour = "wait", block
    holder = threading.Thread(target=served.deliver, args=("report", holder_time))
    holder.start()
    assert started.wait(30), "the holder's body never started"
    served.behaviour = lambda: {"rows": 1}
    answer = served.deliver("report", run_time)
    assert (answer["status_code"], answer["outcome"]) == (409, "waiting"), answer
    return release, holder


def waited_out(ops, served, clock, request):
    """A `wait` job's 03:00 run answered 409 while 02:50 held the job, which then completed; Scheduler's
    retries of 03:00 ran out (none came after), so it has a waiting note and no record."""
    release, holder = _waiting(served, SCHEDULED - timedelta(minutes=10), SCHEDULED)
    release.set()
    holder.join(30)
    assert served.answers[-1]["outcome"] == "completed"
    return ("--job", "report", "--time", "2026-11-29T03:00:00Z")


def waited_out_while_the_run_before_still_holds_the_job(ops, served, clock, request):
    release, holder = _waiting(served, SCHEDULED - timedelta(minutes=10), SCHEDULED)
    request.addfinalizer(lambda: (release.set(), holder.join(30)))
    return ("--job", "report", "--time", "2026-11-29T03:00:00Z")


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
    (forced_completed, []),
    (forced_failed_in_its_interval, []),
    (forced_failed_past_its_interval, ["gcloud"]),
    (rerun_delivery, ["show"]),
    (event_lease_ended, ["release"]),
    (dead_letter_copy_new, ["replay"]),
    (dead_letter_copy_replayed, ["runs"]),
    (dead_letter_replay_unconfirmed, ["runs", "replay"]),
]


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
