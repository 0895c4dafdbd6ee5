"""The event verdict judges any job from its ledger record, its bodies (the core's lines), its
declared effects (if any) and its dead letters: each rule on a message made by hand. A dead
letter's reason must be true for its message, whichever limit it was planned to reach."""

from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest

from localscheduler.pubsub.push_proxy import Push
from localscheduler.pubsub.topology import DeadLetter
from localscheduler.verdicts.bodies import Body
from localscheduler.verdicts.events import (
    EventStore,
    Limits,
    Published,
    event_summary,
    instance_deaths,
    judge_message,
)
from runonce.contract import BodyEnd

pytestmark = pytest.mark.fast

LIMITS = Limits(max_event_age_seconds=40, max_delivery_attempts=5)
MESSAGE = Published(
    "00001", "41", "projects/p/topics/t", "projects/p/subscriptions/s", "none", "completed", LIMITS
)
KEY = MESSAGE.key
T0 = datetime(2026, 3, 29, 12, 0, tzinfo=UTC)


def _at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


def _body(attempt: str, start: float, end: float | None, how: BodyEnd | None = BodyEnd.SUCCEEDED) -> Body:
    ended = None if end is None else _at(end)
    return Body(KEY, attempt, "job-0", _at(start), ended, how if end is not None else None)


def _record(attempt: str, status: str = "completed") -> dict:
    return {"status": status, "attempt_id": attempt, "expire_at": _at(9999)}


def _judge(record, bodies, effects=None, letters=(), pushes=(), message=MESSAGE):
    store = EventStore({KEY: record} if record else {}, effects, {KEY: bodies})
    deaths = instance_deaths(pushes).get(MESSAGE.message_id, [])
    return judge_message(message, store, letters, deaths, pushes)


def _died(start: float, end: float) -> Push:
    return Push(
        "41",
        MESSAGE.subscription,
        502,
        "instance_died",
        _at(start).timestamp(),
        _at(end).timestamp(),
        "job-0",
        died=_at(end).timestamp(),
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
    assert (good.fate, good.problems) == ("permanent_failure", ())
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

    from localscheduler.verdicts.events import judge_all

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


# Planned to exhaust its 5 delivery attempts: published at 0 s, every body raised, and the emulator
# pushed it again every 3 s; on a slow machine it was still being delivered after 40 s.
EXHAUSTED = replace(MESSAGE, fault="attempts_exhausted", expected="delivery_attempts")
TOO_OLD_COPY = DeadLetter("90", b"{}", {"runonce_reason": "too_old", "runonce_event_id": "41"})
PUBSUB_COPY = DeadLetter("91", b"{}", {"CloudPubSubDeadLetterSourceDeliveryCount": "5"})


def _push(start: float, end: float, status: int = 500, outcome: str = "retry", copy: bool = False) -> Push:
    return Push(
        "41",
        MESSAGE.subscription,
        status,
        outcome,
        _at(start).timestamp(),
        _at(end).timestamp(),
        "job-0",
        T0.timestamp(),
        copy,
    )


def _too_old_record(finished: float) -> dict:
    error = "too old: the event is 44 s old, more than RUNONCE_MAX_EVENT_AGE_SECONDS (40 s); it was not run"
    return {
        **_record("z", "failed"),
        "error": error,
        "finished_at": _at(finished),
        "dead_letter_message_id": "90",
    }


def _retried(count: int) -> list[Body]:
    return [_body(f"r{n}", 3 * n, 3 * n + 0.5, BodyEnd.RETRYABLE) for n in range(count)]


def test_a_message_planned_to_exhaust_its_attempts_and_dead_lettered_too_old_when_it_was_passes():
    pushes = [_push(3 * n, 3 * n + 0.5) for n in range(4)] + [_push(44.0, 44.3, 200, "too_old")]
    verdict = _judge(_too_old_record(44.1), _retried(4), {}, [TOO_OLD_COPY], pushes, EXHAUSTED)
    assert (verdict.fate, verdict.problems) == ("too_old", ())
    assert verdict.evidence == "44.1 s old when handled, past the 40 s maximum age"


def test_the_summary_says_which_reason_was_accepted_instead_of_the_planned_one():
    pushes = [_push(3 * n, 3 * n + 0.5) for n in range(4)] + [_push(44.0, 44.3, 200, "too_old")]
    verdict = _judge(_too_old_record(44.1), _retried(4), {}, [TOO_OLD_COPY], pushes, EXHAUSTED)
    lines = event_summary([verdict], [])
    assert "0 effects + 1 dead letters [too_old 1] = 1 published" in lines[0]
    assert lines[2:] == [
        "1 messages reached another limit than planned first, a true reason accepted:",
        "  message 41 (attempts_exhausted, planned delivery_attempts): too_old, 44.1 s old when handled, "
        "past the 40 s maximum age",
    ]


def test_a_too_old_copy_of_a_message_younger_than_the_maximum_age_is_a_lie_and_fails():
    pushes = [_push(3 * n, 3 * n + 0.5) for n in range(4)] + [_push(12.0, 12.3, 200, "too_old")]
    verdict = _judge(_too_old_record(12.1), _retried(4), {}, [TOO_OLD_COPY], pushes, EXHAUSTED)
    assert verdict.problems == (
        "dead-lettered too_old at 12.1 s old, within the maximum age of 40 s: the reason is false",
    )
    planned = replace(EXHAUSTED, fault="too_old", expected="too_old")
    assert not _judge(_too_old_record(12.1), [], {}, [TOO_OLD_COPY], pushes, planned).ok


def test_a_too_old_record_written_when_no_push_of_it_was_open_fails():
    pushes = [_push(44.0, 44.3, 200, "too_old")]
    verdict = _judge(_too_old_record(50.0), [], {}, [TOO_OLD_COPY], pushes, EXHAUSTED)
    assert verdict.problems == ("recorded too old at a moment when no push of it was open",)


def test_a_too_old_copy_of_a_permanent_failure_and_the_reverse_fail():
    permanent = {**_record("a", "failed"), "error": "PermanentError: no", "dead_letter_message_id": "90"}
    verdict = _judge(permanent, [_body("a", 0, 1, BodyEnd.PERMANENT)], {}, [TOO_OLD_COPY], [_push(0, 1, 200)])
    assert verdict.problems == ("copy says too_old, but the ledger says failed: PermanentError: no",)
    copy = DeadLetter("90", b"{}", {"runonce_reason": "permanent_failure", "runonce_event_id": "41"})
    verdict = _judge(_too_old_record(44.1), [], {}, [copy], [_push(44.0, 44.3, 200, "too_old")])
    assert verdict.problems[0].startswith("copy says permanent_failure, but the ledger says failed: too old:")


def test_a_pubsub_copy_after_the_allowed_deliveries_each_nacked_passes():
    pushes = [_push(3 * n, 3 * n + 0.5) for n in range(5)]
    verdict = _judge(None, _retried(5), {}, [PUBSUB_COPY], pushes, EXHAUSTED)
    assert (verdict.fate, verdict.problems) == ("delivery_attempts", ())
    assert verdict.evidence == "5 deliveries, each nacked, of 5 allowed"


def test_a_pubsub_copy_before_the_attempts_ran_out_or_after_an_ack_is_a_lie_and_fails():
    early = [_push(3 * n, 3 * n + 0.5) for n in range(4)] + [_push(0, 0.1, copy=True)]
    assert _judge(None, _retried(4), {}, [PUBSUB_COPY], early, EXHAUSTED).problems == (
        "dead-lettered by Pub/Sub for its delivery attempts after 4 deliveries, 4 of them nacked, "
        "of 5 allowed: the reason is false",
    )
    acked = [_push(3 * n, 3 * n + 0.5) for n in range(5)] + [_push(15, 15.5, 204, "duplicate")]
    assert not _judge(None, _retried(5), {}, [PUBSUB_COPY], acked, EXHAUSTED).ok


def test_a_message_planned_to_be_dead_lettered_that_completed_fails():
    planned = replace(MESSAGE, fault="too_old", expected="too_old")
    verdict = _judge(_record("a"), [_body("a", 44, 45)], {KEY: ["a"]}, message=planned)
    assert verdict.problems == ("expected too_old for fault too_old, got completed",)


def test_two_dead_letter_copies_fail_even_when_each_reason_is_true():
    pushes = [_push(3 * n, 3 * n + 0.5) for n in range(4)] + [_push(44.0, 44.3, 200, "too_old")]
    verdict = _judge(_too_old_record(44.1), _retried(4), {}, [TOO_OLD_COPY, PUBSUB_COPY], pushes, EXHAUSTED)
    assert "0 completed records and 2 dead-letter copies: not exactly one end" in verdict.problems


def _past_deadline(start: float, end: float, died: float | None) -> Push:
    """A push answered 504 at its ack deadline, whose request ended at `end` (its instance died
    then, if `died`)."""
    push = _push(start, end, 504, "deadline_exceeded")
    return replace(push, died=None if died is None else _at(died).timestamp())


def test_a_body_killed_after_its_push_was_answered_at_the_ack_deadline_is_excused():
    pushes = [_past_deadline(-0.1, 14.0, died=14.0)]
    verdict = _judge(_record("b"), [_body("a", 0, None), _body("b", 20, 21)], {KEY: ["b"]}, pushes=pushes)
    assert verdict.problems == ()


def test_a_body_that_never_ended_under_a_push_past_its_deadline_whose_instance_lived_fails():
    pushes = [_past_deadline(-0.1, 14.0, died=None)]
    verdict = _judge(_record("b"), [_body("a", 0, None), _body("b", 20, 21)], {KEY: ["b"]}, pushes=pushes)
    assert "body a never ended and its instance was not killed" in verdict.problems
