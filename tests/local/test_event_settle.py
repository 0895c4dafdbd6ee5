"""When the event harness gives up waiting, it says which condition failed: a message that never
ended, a push still open (with its message, attempt and age, and whether its message had ended),
or pushes that ended too recently; and the wait itself is derived from the timing it must
outlast."""

import pytest

from localscheduler.demos.events import DEMO_MIX, TEAM_CONFIG, TEAM_MIX, EventConfig, unsettled
from localscheduler.pubsub.push_proxy import OpenPush
from localscheduler.pubsub.topology import PushPolicy
from localscheduler.verdicts.events import Limits, Published

pytestmark = pytest.mark.fast

LIMITS = Limits(max_event_age_seconds=18, max_delivery_attempts=20)
ENDED = Published("00001", "41", "t", "s", "lost_ack", "completed", LIMITS)
OPEN = Published("00002", "42", "t", "s", "killed_holding_claim", "completed", LIMITS)


def test_a_message_that_never_ended_is_named_with_its_fault():
    lines = unsettled([ENDED, OPEN], {"41": "completed"}, [], quiet_for=30.0, quiet=4.0, now=100.0)
    assert lines == (
        "message 42 (killed_holding_claim) never ended: no completed ledger record, no dead letter",
    )


def test_an_open_redelivery_of_an_ended_message_is_told_apart_from_a_message_that_never_ended():
    pushes = [
        OpenPush("41", 3, False, arrived=63.0, instance="orders-1"),
        OpenPush("42", 1, True, arrived=90.0),
    ]
    lines = unsettled([ENDED, OPEN], {"41": "completed"}, pushes, quiet_for=0.0, quiet=4.0, now=100.0)
    assert lines == (
        "message 42 (killed_holding_claim) never ended: no completed ledger record, no dead letter",
        "push still open, a redelivery of a message that had ended (completed): "
        "message 41, attempt 3, open 37 s: on instance orders-1",
        "push still open, its message had not ended: message 42, attempt 1, the proxy's copy, open 10 s: "
        "waiting for an instance",
    )


def test_pushes_that_ended_too_recently_are_the_only_condition_left():
    lines = unsettled([ENDED], {"41": "completed"}, [], quiet_for=1.5, quiet=4.0, now=100.0)
    assert lines == ("pushes still coming: the last ended 1.5 s ago, 4 s of quiet asked",)
    assert unsettled([ENDED], {"41": "completed"}, [], quiet_for=5.0, quiet=4.0, now=100.0) == ()


def test_the_wait_outlasts_the_last_planned_end_a_request_timeout_and_an_ack_deadline():
    # the demo: a late message released at 43 s, + 10 s ack deadline + 30 s request timeout
    assert EventConfig().last_end_seconds(DEMO_MIX) == 83.0
    assert TEAM_CONFIG.last_end_seconds(TEAM_MIX) == 61.0
    assert EventConfig(settle_seconds=120.0).margin_problems(DEMO_MIX) == [
        "settle_seconds (120 s) must outlast the last planned end, a request timeout and an ack deadline "
        "on a loaded machine, then 4 s of quiet: allow at least 128.5"
    ]


def test_a_slow_job_must_fit_the_request_timeout_and_both_subscriptions_share_the_ack_deadline():
    config = EventConfig(
        request_timeout_seconds=12.0, exhausted_policy=PushPolicy(20, max_delivery_attempts=5)
    )
    assert config.margin_problems(DEMO_MIX)[:2] == [
        "a slow job (11 s) must end within the request timeout (12 s) with 3.75 s to spare",
        "the proxy applies one ack deadline: policy has 10 s, exhausted_policy 20 s",
    ]
