"""The event settings are validated like the scheduled ones: every mistake is a ConfigError naming
the setting and the fix, found before anything is read from the store."""

from __future__ import annotations

from datetime import timedelta

import pytest

from runonce import ConfigError
from runonce.core.event import load_event_settings
from runonce.core.settings import load_settings


def _event_settings(environ: dict[str, str], project: str | None = None):
    return load_event_settings(load_settings({}, environ=environ), {}, environ=environ, project=project)


def test_the_defaults_are_a_day_of_event_age_under_a_week_of_retention():
    settings = _event_settings({"RUNONCE_DEAD_LETTER_TOPIC": "projects/p/topics/dead"})
    assert settings.max_event_age == timedelta(days=1)
    assert settings.dead_letter_topic == "projects/p/topics/dead"


def test_a_maximum_age_not_shorter_than_the_retention_is_refused_naming_both():
    environ = {
        "RUNONCE_DEAD_LETTER_TOPIC": "projects/p/topics/dead",
        "RUNONCE_RETENTION_SECONDS": "3600",
        "RUNONCE_LEASE_SECONDS": "60",
        "RUNONCE_MAX_EVENT_AGE_SECONDS": "3600",
    }
    with pytest.raises(ConfigError) as raised:
        _event_settings(environ)
    message = str(raised.value)
    assert "retention (3600 s) must be longer than the maximum event age (3600 s)" in message
    assert "RUNONCE_RETENTION_SECONDS" in message and "RUNONCE_MAX_EVENT_AGE_SECONDS" in message


@pytest.mark.parametrize("value", ["0", "604801", "1_000", "ten", " "])
def test_a_maximum_age_outside_one_second_to_seven_days_is_refused(value):
    environ = {"RUNONCE_DEAD_LETTER_TOPIC": "projects/p/topics/dead", "RUNONCE_MAX_EVENT_AGE_SECONDS": value}
    with pytest.raises(ConfigError, match="RUNONCE_MAX_EVENT_AGE_SECONDS"):
        _event_settings(environ)


def test_no_dead_letter_topic_is_refused_saying_why_it_is_needed():
    with pytest.raises(ConfigError, match="RUNONCE_DEAD_LETTER_TOPIC is not set: an event that fails"):
        _event_settings({})


@pytest.mark.parametrize(
    "topic",
    ["projects/p/topics/ab", "projects/p/topics/goog-dead", "projects/p/topics/1dead", "dead letters"],
)
def test_a_topic_pubsub_would_refuse_is_refused(topic):
    with pytest.raises(ConfigError, match="is not a Pub/Sub topic: use projects/PROJECT/topics/TOPIC"):
        _event_settings({"RUNONCE_DEAD_LETTER_TOPIC": topic})


def test_a_topic_id_alone_is_completed_with_the_project():
    assert _event_settings({"RUNONCE_DEAD_LETTER_TOPIC": "dead"}, project="acme").dead_letter_topic == (
        "projects/acme/topics/dead"
    )
    environ = {"RUNONCE_DEAD_LETTER_TOPIC": "dead", "GOOGLE_CLOUD_PROJECT": "from-env"}
    assert _event_settings(environ, project="acme").dead_letter_topic == "projects/from-env/topics/dead"
    with pytest.raises(ConfigError, match="names no project"):
        _event_settings({"RUNONCE_DEAD_LETTER_TOPIC": "dead"})


def test_decorator_options_win_over_the_environment():
    environ = {"RUNONCE_DEAD_LETTER_TOPIC": "projects/p/topics/env", "RUNONCE_MAX_EVENT_AGE_SECONDS": "60"}
    settings = load_event_settings(
        load_settings({}, environ=environ),
        {"dead_letter_topic": "projects/p/topics/option", "max_event_age": 120},
        environ=environ,
    )
    assert settings.dead_letter_topic == "projects/p/topics/option"
    assert settings.max_event_age == timedelta(seconds=120)
