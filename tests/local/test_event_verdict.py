"""The event verdict judges any job from its ledger record, its bodies (the core's lines), its
declared effects (if any) and its dead letters: each rule on a message made by hand."""

from datetime import UTC, datetime, timedelta

from localscheduler.bodies import Body
from localscheduler.event_verdict import EventStore, Published, instance_deaths, judge_message
from localscheduler.pubsub_topology import DeadLetter
from localscheduler.push_proxy import Push
from runonce.contract import BodyEnd

MESSAGE = Published("00001", "41", "projects/p/topics/t", "projects/p/subscriptions/s", "none", "completed")
KEY = MESSAGE.key
T0 = datetime(2026, 3, 29, 12, 0, tzinfo=UTC)


def _at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


def _body(attempt: str, start: float, end: float | None, how: BodyEnd | None = BodyEnd.SUCCEEDED) -> Body:
    ended = None if end is None else _at(end)
    return Body(KEY, attempt, "job-0", _at(start), ended, how if end is not None else None)


def _record(attempt: str, status: str = "completed") -> dict:
    return {"status": status, "attempt_id": attempt, "expire_at": _at(9999)}


def _judge(record, bodies, effects=None, letters=(), pushes=()):
    store = EventStore({KEY: record} if record else {}, effects, {KEY: bodies})
    return judge_message(MESSAGE, store, letters, instance_deaths(pushes).get(MESSAGE.message_id, []))


def _died(start: float, end: float) -> Push:
    return Push(
        "41",
        MESSAGE.subscription,
        502,
        "instance_died",
        _at(start).timestamp(),
        _at(end).timestamp(),
        "job-0",
    )


def test_one_body_one_effect_and_a_completed_record_by_it_is_one_end():
    verdict = _judge(_record("a"), [_body("a", 0, 1)], {KEY: ["a"]})
    assert (verdict.problems, verdict.fate, verdict.effects, verdict.bodies) == ((), "completed", 1, 1)


def test_two_effects_fail():
    verdict = _judge(_record("a"), [_body("a", 0, 1)], {KEY: ["a", "a"]})
    assert "2 effects, ledger status completed" in verdict.problems


def test_an_effect_written_by_an_attempt_without_a_body_fails():
    verdict = _judge(_record("a"), [_body("a", 0, 1)], {KEY: ["z"]})
    assert "effect written by attempt z, which started no body of this message" in verdict.problems


def test_a_body_started_again_after_one_that_succeeded_fails():
    verdict = _judge(_record("b"), [_body("a", 0, 1), _body("b", 5, 6)], {KEY: ["a"]})
    assert "body started again after a ended succeeded" in verdict.problems


def test_a_body_killed_under_its_push_is_taken_over_and_the_next_body_finds_its_effect():
    pushes = [_died(-0.1, 0.5)]
    verdict = _judge(_record("b"), [_body("a", 0, None), _body("b", 7, 8)], {KEY: ["a"]}, pushes=pushes)
    assert (verdict.problems, verdict.bodies, verdict.found) == ((), 2, 1)


def test_a_push_that_failed_at_once_excuses_no_restart():
    pushes = [_died(3, 3.01)]
    verdict = _judge(_record("b"), [_body("a", 0, None), _body("b", 7, 8)], {KEY: ["b"]}, pushes=pushes)
    assert "body a never ended and its instance was not killed" in verdict.problems


def test_two_bodies_at_once_fail():
    pushes = [_died(-0.1, 9)]
    verdict = _judge(_record("b"), [_body("a", 0, None), _body("b", 7, 8)], {KEY: ["b"]}, pushes=pushes)
    assert "bodies a and b ran at the same time" in verdict.problems


def test_a_completed_record_and_a_dead_letter_are_two_ends():
    letter = DeadLetter("90", b"{}", {"runonce_reason": "permanent_failure", "runonce_event_id": "41"})
    verdict = _judge(_record("a"), [_body("a", 0, 1)], {KEY: ["a"]}, letters=[letter])
    assert verdict.fate == "permanent_failure+completed"
    assert "1 completed records and 1 dead-letter copies: not exactly one end" in verdict.problems


def test_a_failed_record_must_follow_a_permanent_body_and_carry_its_copy():
    letter = DeadLetter("90", b"{}", {"runonce_reason": "permanent_failure", "runonce_event_id": "41"})
    record = {**_record("a", "failed"), "dead_letter_message_id": "90"}
    good = _judge(record, [_body("a", 0, 1, BodyEnd.PERMANENT)], {}, letters=[letter])
    assert (good.fate, good.problems[-1]) == (
        "permanent_failure",
        "expected completed for fault none, got permanent_failure",
    )
    bad = _judge(record, [_body("a", 0, 1, BodyEnd.SUCCEEDED)], {}, letters=[letter])
    assert "failed, but its last body ended succeeded" in bad.problems


def test_without_declared_effects_the_ledger_and_the_bodies_decide():
    assert _judge(_record("a"), [_body("a", 0, 1)]).problems == ()
    assert _judge(_record("a"), [_body("a", 0, 1)]).effects is None
    assert (
        "completed, but its last body ended retryable"
        in _judge(_record("a"), [_body("a", 0, 1, BodyEnd.RETRYABLE)]).problems
    )


def test_a_message_with_no_end_is_lost():
    verdict = _judge(None, [])
    assert (
        verdict.fate == "lost"
        and "0 completed records and 0 dead-letter copies: not exactly one end" in verdict.problems
    )


def test_a_wrapped_copy_is_judged_with_its_message_and_a_note_is_no_stray():
    from google.pubsub_v1.types import PubsubMessage

    from localscheduler.event_verdict import judge_all

    original = PubsubMessage(data=b"{}", attributes={"demo_id": MESSAGE.demo_id, "googclient_x": "y"})
    wrapped = {
        "runonce_reason": "permanent_failure",
        "runonce_event_id": "41",
        "runonce_wrapped": "google.pubsub.v1.PubsubMessage",
    }
    letter = DeadLetter("90", PubsubMessage.serialize(original), wrapped)
    note = DeadLetter("91", b"", {"runonce_reason": "permanent_failure", "runonce_copy_message_id": "90"})
    record = {**_record("a", "failed"), "dead_letter_message_id": "90"}
    store = EventStore({KEY: record}, None, {KEY: [_body("a", 0, 1, BodyEnd.PERMANENT)]})
    [verdict], strays = judge_all([MESSAGE], store, [letter, note], [])
    assert strays == [] and verdict.fate == "permanent_failure"
