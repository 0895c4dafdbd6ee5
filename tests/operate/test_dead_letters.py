"""`runonce dead-letters` and `runonce replay` on the Pub/Sub emulator: copies listed without being
acknowledged, replayed once, fenced and recorded on the original's record."""

from __future__ import annotations

import json

import pytest
from google.api_core import exceptions as gexc

from operate import dead_letters, replay
from runonce.contract import ACTIONS_FIELD, DEAD_LETTER_MESSAGE_ID_FIELD, DeadLetterReason
from runonce.core.event import Event
from runonce.core.store import Claim
from runonce.events.deadletter import DeadLetters
from tests.conftest import SCHEDULED
from tests.operate.conftest import ON_BOTH_STORES

ORIGINAL = {"order": "7"}


@pytest.fixture(params=ON_BOTH_STORES)
def ledger_kind(request) -> str:
    """Every test here runs on a team on Firestore and on a team on Valkey (replay records there)."""
    return request.param


def _forward(ops, topics, key: str = "event-run") -> str:
    """Dead-letter an event the way the library does, its record marked failed; the copy's id."""
    job = ops.team.event_jobs[0]
    event = Event("m-1", job.push_subscription, SCHEDULED, dict(ORIGINAL), b'{"total": 12}')
    fields = {"event_kind": "pubsub", "event_source": job.push_subscription, "event_id": "m-1"}
    claim = ops.store.claim(key, fields)
    if isinstance(claim, Claim):  # else failed already: the same event dead-lettered again
        ops.store.fail(claim, "order 7 is invalid")
    forwarded = DeadLetters(job.dead_letter_topic, topics.publisher).forward(
        event, DeadLetterReason.PERMANENT_FAILURE, key, 1, "order 7 is invalid"
    )
    ops.store.annotate(key, {DEAD_LETTER_MESSAGE_ID_FIELD: forwarded.message_id})
    return forwarded.message_id


def _listed(ops) -> list[dict]:
    result = ops.run("dead-letters", "--team", ops.team.name, "--job", "orders", "--json")
    assert result.exit_code == 0, result.stderr
    return [json.loads(line) for line in result.stdout.splitlines()]


def test_dead_letters_lists_runonces_and_pubsubs_copies_with_their_reasons_and_acknowledges_none(ops, topics):
    ours = _forward(ops, topics)
    pubsubs = {
        "CloudPubSubDeadLetterSourceDeliveryCount": "15",
        "CloudPubSubDeadLetterSourceSubscription": "x",
    }
    theirs = topics.dead_letter(b"{}", {"a": "1", **pubsubs})
    first = {row["copy_id"]: row for row in _listed(ops)}
    assert set(first) == {ours, theirs}
    assert (first[ours]["kind"], first[ours]["reason"], first[ours]["run_key"]) == (
        "runonce",
        "permanent_failure",
        "event-run",
    )
    assert first[ours]["error"] == "order 7 is invalid" and first[ours]["original_attributes"] == ORIGINAL
    assert (first[theirs]["kind"], first[theirs]["reason"], first[theirs]["delivery_count"]) == (
        "pubsub",
        "max_delivery_attempts",
        "15",
    )
    assert first[theirs]["original_attributes"] == {"a": "1"} and first[theirs]["source_subscription"] == "x"
    assert {row["copy_id"] for row in _listed(ops)} == {ours, theirs}  # still there: none acknowledged


def test_replay_publishes_the_original_once_records_it_and_acknowledges_the_copy(ops, topics):
    copy_id = _forward(ops, topics)
    result = ops.run("replay", copy_id, "--team", ops.team.name, "--job", "orders", "--by", "tester")
    assert result.exit_code == 0, result.stderr
    [published] = topics.drain(topics.replayed, expected=1)
    assert (bytes(published.data), dict(published.attributes)) == (b'{"total": 12}', ORIGINAL)
    steps = [(a["action"], a["by"], a["detail"]["copy"]) for a in ops.store.read("event-run")[ACTIONS_FIELD]]
    assert steps == [("replay", "tester", copy_id), ("replay_published", "tester", copy_id)]
    assert _listed(ops) == []
    again = ops.run("replay", copy_id, "--team", ops.team.name, "--job", "orders", "--by", "tester")
    assert again.exit_code == 2 and "COPY_ID" in again.stderr


def test_a_second_replay_of_the_event_is_refused_unless_again(ops, topics):
    _forward(ops, topics)
    assert (
        ops.run(
            "replay", _listed(ops)[0]["copy_id"], "--team", ops.team.name, "--job", "orders", "--by", "t"
        ).exit_code
        == 0
    )
    second = _forward(ops, topics)  # the same event dead-lettered again (same run key)
    topics.drain(topics.replayed)
    refused = ops.run("replay", second, "--team", ops.team.name, "--job", "orders", "--by", "t")
    assert refused.exit_code == 2 and "replayed already" in refused.stderr and "--again" in refused.stderr
    assert topics.drain(topics.replayed) == []
    assert [row["copy_id"] for row in _listed(ops)] == [second]
    assert (
        ops.run(
            "replay", second, "--team", ops.team.name, "--job", "orders", "--by", "t", "--again"
        ).exit_code
        == 0
    )
    assert len(topics.drain(topics.replayed, expected=1)) == 1


def test_a_crash_between_publish_and_record_leaves_the_copy_and_refuses_the_next_replay_as_unconfirmed(
    ops, topics, monkeypatch
):
    copy_id = _forward(ops, topics)
    monkeypatch.setattr(dead_letters, "HOLD_SECONDS", 1)

    def crash(*args, **kwargs):
        raise RuntimeError("the operator's machine went down")

    with monkeypatch.context() as patch:
        patch.setattr(replay, "confirm", crash)
        with pytest.raises(RuntimeError, match="went down"):
            ops.run("replay", copy_id, "--team", ops.team.name, "--job", "orders", "--by", "t")
    # Published; the copy's lease (1 s here) runs out meanwhile.
    assert len(topics.drain(topics.replayed, expected=1)) == 1
    assert [row["copy_id"] for row in _listed(ops)] == [copy_id]
    refused = ops.run("replay", copy_id, "--team", ops.team.name, "--job", "orders", "--by", "t")
    assert refused.exit_code == 2 and "never confirmed" in refused.stderr
    assert topics.drain(topics.replayed) == []
    assert (
        ops.run(
            "replay", copy_id, "--team", ops.team.name, "--job", "orders", "--by", "t", "--again"
        ).exit_code
        == 0
    )
    assert len(topics.drain(topics.replayed, expected=1)) == 1 and _listed(ops) == []


def test_a_copy_whose_replay_was_recorded_but_not_acknowledged_is_acknowledged_without_publishing(
    ops, topics, monkeypatch
):
    copy_id = _forward(ops, topics)
    monkeypatch.setattr(dead_letters, "HOLD_SECONDS", 1)
    with monkeypatch.context() as patch:
        patch.setattr(dead_letters, "acknowledge", lambda *args: None)  # the acknowledgement is lost
        assert (
            ops.run("replay", copy_id, "--team", ops.team.name, "--job", "orders", "--by", "t").exit_code == 0
        )
    assert len(topics.drain(topics.replayed, expected=1)) == 1
    result = ops.run("replay", copy_id, "--team", ops.team.name, "--job", "orders", "--by", "t")
    assert result.exit_code == 0 and "nothing published" in result.stdout
    assert topics.drain(topics.replayed) == [] and _listed(ops) == []


def test_replay_of_pubsubs_own_copy_is_fenced_on_a_record_of_that_copy(ops, topics):
    copy_id = topics.dead_letter(b"raw", {"a": "1", "CloudPubSubDeadLetterSourceDeliveryCount": "15"})
    assert ops.run("replay", copy_id, "--team", ops.team.name, "--job", "orders", "--by", "t").exit_code == 0
    [published] = topics.drain(topics.replayed, expected=1)
    assert (bytes(published.data), dict(published.attributes)) == (b"raw", {"a": "1"})
    [record] = [r for r in ops.store.find({}).values() if ACTIONS_FIELD in r]
    assert [a["action"] for a in record[ACTIONS_FIELD]] == ["replay", "replay_published"]
    assert "expire_at" in record


def test_show_of_a_dead_lettered_event_gives_its_copy_and_the_replay_command(ops, topics):
    copy_id = _forward(ops, topics)
    result = ops.run("show", "event-run", "--team", ops.team.name)
    assert result.exit_code == 0, result.stderr
    shown = json.loads(result.stdout)
    assert shown["job"] == "orders" and shown["dead_letter_copy"]["copy_id"] == copy_id
    assert shown["next"][0]["command"] == f"runonce replay {copy_id} --team {ops.team.name}"


def test_dead_letters_of_a_job_whose_subscription_does_not_exist_exits_1_with_pubsubs_reason(ops):
    result = ops.run("dead-letters", "--team", ops.team.name, "--job", "orders")
    assert result.exit_code == 1
    assert f"{ops.team.event_jobs[0].dead_letter_subscription} does not exist" in result.stderr
    assert "make deploy" in result.stderr


def test_dead_letters_of_a_scheduled_job_exits_2(ops):
    result = ops.run("dead-letters", "--team", ops.team.name, "--job", "report")
    assert result.exit_code == 2 and "only event jobs have dead letters" in result.stderr


def test_a_failed_publish_is_recorded_leaves_the_copy_and_does_not_refuse_the_next_replay(ops, topics):
    copy_id = _forward(ops, topics)
    topics.publisher.delete_topic(request={"topic": ops.team.event_jobs[0].topic})
    failed = ops.run("replay", copy_id, "--team", ops.team.name, "--job", "orders", "--by", "t")
    assert failed.exit_code == 1 and "Pub/Sub refused the publish" in failed.stderr
    assert [a["action"] for a in ops.store.read("event-run")[ACTIONS_FIELD]] == ["replay", "replay_failed"]
    assert [row["copy_id"] for row in _listed(ops)] == [copy_id]
    topics.publisher.create_topic(request={"name": ops.team.event_jobs[0].topic})
    topics.subscriber.delete_subscription(request={"subscription": topics.replayed})
    topics.subscriber.create_subscription(
        request={"name": topics.replayed, "topic": ops.team.event_jobs[0].topic}
    )
    assert ops.run("replay", copy_id, "--team", ops.team.name, "--job", "orders", "--by", "t").exit_code == 0
    assert len(topics.drain(topics.replayed, expected=1)) == 1 and _listed(ops) == []


def test_a_wrapped_copy_whose_data_cannot_be_read_is_listed_and_not_replayed(ops, topics):
    copy_id = topics.dead_letter(
        b"\xff\xfe not a message",
        {
            "runonce_reason": "permanent_failure",
            "runonce_run_key": "k",
            "runonce_wrapped": "google.pubsub.v1.PubsubMessage",
        },
    )
    [row] = _listed(ops)
    assert row["copy_id"] == copy_id and "not a serialized PubsubMessage" in row["unreadable"]
    refused = ops.run("replay", copy_id, "--team", ops.team.name, "--job", "orders", "--by", "t")
    assert refused.exit_code == 2 and "cannot be replayed" in refused.stderr
    assert topics.drain(topics.replayed) == [] and [r["copy_id"] for r in _listed(ops)] == [copy_id]
    assert ops.store.read("k") is None


def test_show_of_a_dead_lettered_event_whose_subscription_is_gone_still_shows_the_record(ops):
    job = ops.team.event_jobs[0]
    claim = ops.store.claim(
        "gone", {"event_kind": "pubsub", "event_source": job.push_subscription, "event_id": "m"}
    )
    ops.store.fail(claim, "bad")
    ops.store.annotate("gone", {DEAD_LETTER_MESSAGE_ID_FIELD: "123"})
    result = ops.run("show", "gone", "--team", ops.team.name)
    assert result.exit_code == 0, result.stderr
    shown = json.loads(result.stdout)
    assert shown["record"]["error"] == "bad" and "does not exist" in shown["dead_letter_copy"]["unavailable"]


def test_a_bare_copy_is_listed_with_its_notes_reason_and_replayed_with_the_note_acknowledged(ops, topics):
    # The library's bare form: exactly the original, then a note naming it (runonce.events.deadletter).
    copy_id = topics.dead_letter(b"big original", dict(ORIGINAL))
    notes = {"runonce_reason": "too_old", "runonce_run_key": "bare-run", "runonce_attempt": "2"}
    topics.dead_letter(b"", {**notes, "runonce_copy_message_id": copy_id})
    [row] = _listed(ops)
    assert (row["copy_id"], row["form"], row["reason"], row["run_key"], row["attempt"]) == (
        copy_id,
        "bare",
        "too_old",
        "bare-run",
        "2",
    )
    assert ops.run("replay", copy_id, "--team", ops.team.name, "--job", "orders", "--by", "t").exit_code == 0
    [published] = topics.drain(topics.replayed, expected=1)
    assert (bytes(published.data), dict(published.attributes)) == (b"big original", ORIGINAL)
    assert _listed(ops) == []  # the note went with its copy
    assert ops.store.read("bare-run")[ACTIONS_FIELD][-1]["action"] == "replay_published"


def test_a_publish_without_an_answer_is_recorded_unknown_and_the_next_replay_is_refused(
    ops, topics, monkeypatch
):
    copy_id = _forward(ops, topics)
    sent = replay.publish

    def lost_answer(*args):
        sent(*args)  # it lands; only its answer is lost
        raise gexc.DeadlineExceeded("the publish's deadline passed")

    with monkeypatch.context() as patch:
        patch.setattr(replay, "publish", lost_answer)
        lost = ops.run("replay", copy_id, "--team", ops.team.name, "--job", "orders", "--by", "t")
    assert lost.exit_code == 1 and "may have been published" in lost.stderr
    assert [a["action"] for a in ops.store.read("event-run")[ACTIONS_FIELD]] == ["replay", "replay_unknown"]
    assert len(topics.drain(topics.replayed, expected=1)) == 1
    refused = ops.run("replay", copy_id, "--team", ops.team.name, "--job", "orders", "--by", "t")
    assert refused.exit_code == 2 and "never confirmed (replay_unknown)" in refused.stderr
    assert topics.drain(topics.replayed) == [] and [r["copy_id"] for r in _listed(ops)] == [copy_id]


def test_the_job_an_event_functions_lines_name_is_one_dead_letters_and_replay_take(
    ops, topics, capsys, monkeypatch
):
    """The dead-lettered alert tells the operator to run `runonce dead-letters --team T --job JOB`
    with JOB from the `job` label of the line it fired on: a function deployed as the stack deploys
    it (its event variables) writes a `job` that the command accepts."""
    import flask

    import runonce as library
    from operate.team import load
    from runonce import PermanentError
    from runonce.store.firestore import LedgerStore
    from stacks.constructs.event_job import event_environment
    from tests.events.conftest import envelope, post

    team = load(ops.team.name, None)
    for name, value in event_environment(team, team.event_jobs[0]).items():
        monkeypatch.setenv(name, value)

    def refuse(event):
        raise PermanentError("order 7 is invalid")

    client = ops.store.ledger._client if isinstance(ops.store, LedgerStore) else None  # Valkey: RUNONCE_STORE
    handler = library.deduplicated_event(collection=ops.team.collection, client=client)(refuse)
    app = flask.Flask("orders-function")
    app.add_url_rule("/", "handle", lambda: handler(flask.request._get_current_object()), methods=["POST"])
    capsys.readouterr()
    answer = post(app.test_client(), envelope(subscription=topics.job.push_subscription))
    assert answer.json["outcome"] == "failed" and answer.json["dead_lettered"] is True
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines() if line.startswith("{")]
    [fired] = [line for line in lines if DEAD_LETTER_MESSAGE_ID_FIELD in line]  # the alert's line

    listed = ops.run("dead-letters", "--team", ops.team.name, "--job", fired["job"], "--json")
    assert listed.exit_code == 0, listed.stderr
    [row] = [json.loads(line) for line in listed.stdout.splitlines()]
    assert row["copy_id"] == fired[DEAD_LETTER_MESSAGE_ID_FIELD] and row["job"] == fired["job"]
    replayed = ops.run("replay", row["copy_id"], "--team", ops.team.name, "--job", fired["job"], "--by", "t")
    assert replayed.exit_code == 0, replayed.stderr
