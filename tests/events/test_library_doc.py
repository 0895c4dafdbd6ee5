"""docs/library.md's event tables and lists say what the code does."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest

from runonce import ConfigError
from runonce.contract import DeadLetterForm, DeadLetterReason
from runonce.core.event import MAX_CONSUMER_LENGTH, load_event_settings
from runonce.core.outcomes import Outcome
from runonce.core.settings import load_settings
from tests.core.test_library_doc import documented_ranges, section, settings_rows, table

TOPIC = {"RUNONCE_DEAD_LETTER_TOPIC": "projects/p/topics/dead"}


def test_the_push_status_table_lists_every_outcome_with_its_status():
    rows = {(int(row[0]), row[1].strip("`")) for row in table("### What Pub/Sub push is answered")}
    assert rows == {(outcome.status, outcome.label) for outcome in Outcome}


def test_every_acknowledging_answer_is_200_which_the_service_and_the_emulator_both_ack():
    assert {outcome.status for outcome in Outcome if outcome.status < 300} == {200}


def test_the_event_settings_table_gives_the_default_age_and_the_consumer_limit_the_code_uses():
    documented = settings_rows("### Event settings")
    settings = load_event_settings(load_settings({}, environ=TOPIC), {}, environ=TOPIC)
    age = documented["RUNONCE_MAX_EVENT_AGE_SECONDS"][1]
    assert timedelta(seconds=int(age.split()[0])) == settings.max_event_age
    assert f"at most {MAX_CONSUMER_LENGTH:,} characters" in documented["K_SERVICE"][2]
    assert documented["RUNONCE_DEAD_LETTER_TOPIC"][1] == "required"
    with pytest.raises(ConfigError, match="RUNONCE_DEAD_LETTER_TOPIC"):
        load_event_settings(load_settings({}, environ={}), {}, environ={})


@pytest.mark.parametrize(("name", "low", "high"), documented_ranges("### Event settings"))
def test_each_documented_event_range_is_the_one_the_code_accepts(name, low, high):
    # The longest retention, so that every age in range is shorter than it.
    environ = {**TOPIC, "RUNONCE_RETENTION_SECONDS": "315360000"}
    settings = load_settings({}, environ=environ)
    for inside in (low, high):
        load_event_settings(settings, {}, environ={**environ, name: str(inside)})
    for outside in (low - 1, high + 1):
        with pytest.raises(ConfigError, match=name):
            load_event_settings(settings, {}, environ={**environ, name: str(outside)})


def test_the_event_settings_table_states_the_maximum_age_range():
    ranges = documented_ranges("### Event settings")
    assert [name for name, _, _ in ranges] == ["RUNONCE_MAX_EVENT_AGE_SECONDS"]


def test_the_dead_letter_copy_lists_every_form_and_reason_the_code_writes():
    functions = section("## Event-driven functions")
    forms = re.findall(r"^  - `(\w+)`", functions, flags=re.MULTILINE)
    assert forms == [form.value for form in DeadLetterForm]
    reasons = re.search(r"`runonce_reason` \(([^)]*)\)", functions)
    assert reasons, "the dead-letter copy does not list runonce_reason's values"
    assert set(re.findall(r"`(\w+)`", reasons[1])) == {reason.value for reason in DeadLetterReason}
