"""RUNONCE_TARGET: what a valid target looks like, and what every mistake is told."""

from __future__ import annotations

import json

import pytest

from runonce import ConfigError
from runonce.targets import BuildTrigger, GoogleApi, Workflow, label_value, load_target
from runonce.targets.proxy import Proxy

from .conftest import TRIGGER, WORKFLOW, FakeCredentials


def _load(config) -> object:
    return load_target({"RUNONCE_TARGET": json.dumps(config)})


def test_a_workflow_target_is_read_from_json():
    assert _load({"kind": "workflow", "workflow": WORKFLOW, "argument": {"a": 1}}) == Workflow(
        WORKFLOW, {"a": 1}
    )


def test_a_generic_target_keeps_method_url_body_and_role():
    url = "https://pubsub.googleapis.com/v1/projects/p/topics/t:publish"
    target = _load({"kind": "googleapis", "method": "post", "url": url, "body": {"x": 1}, "role": "roles/r"})
    assert target == GoogleApi("POST", url, "roles/r", {"x": 1})


@pytest.mark.parametrize(
    ("config", "message"),
    [
        ({"kind": "ftp"}, "kind='ftp' is not a target"),
        ({"kind": "workflow"}, "needs 'workflow'"),
        ({"kind": "workflow", "workflow": "nightly-etl"}, "does not look like"),
        ({"kind": "workflow", "workflow": WORKFLOW, "argument": [1]}, "'argument' must be a JSON object"),
        ({"kind": "cloud_run_job", "job": "projects/p/jobs/j"}, "does not look like"),
        ({"kind": "build_trigger", "trigger": TRIGGER, "substitutions": {"ENV": "x"}}, "must start with '_'"),
        (
            {"kind": "googleapis", "method": "POST", "url": "http://pubsub.googleapis.com/v1/x"},
            "must be https",
        ),
        ({"kind": "googleapis", "method": "POST", "url": "https://example.com/v1/x"}, "googleapis.com host"),
        ({"kind": "googleapis", "method": "BREW", "url": "https://x.googleapis.com/v1"}, "must be one of"),
    ],
)
def test_an_invalid_target_names_the_field_and_the_fix(config, message):
    with pytest.raises(ConfigError, match="RUNONCE_TARGET") as raised:
        _load(config)
    assert message in str(raised.value)


@pytest.mark.parametrize(
    ("environ", "message"), [({}, "is not set"), ({"RUNONCE_TARGET": "{"}, "not valid JSON")]
)
def test_a_missing_or_broken_variable_is_a_config_error(environ, message):
    with pytest.raises(ConfigError, match=message):
        load_target(environ)


def test_the_label_value_fits_the_workflows_label_rules():
    key = "0123456789abcdef" * 4
    value = label_value(key)
    assert len(value) == 63 and key.startswith(value)
    assert set(value) <= set("0123456789abcdefghijklmnopqrstuvwxyz_-")


def test_a_build_trigger_name_gives_project_and_trigger_ids_for_the_run_body():
    body = BuildTrigger(TRIGGER).start("k").body
    assert (body["projectId"], body["triggerId"]) == ("acme-prod", "nightly-build")


def test_the_proxy_reads_target_base_url_and_timeout_from_the_environment(stand_in):
    environ = {
        "RUNONCE_TARGET": json.dumps({"kind": "workflow", "workflow": WORKFLOW}),
        "RUNONCE_TARGET_BASE_URL": stand_in.url + "/",
        "RUNONCE_TARGET_TIMEOUT_SECONDS": "5",
    }
    result = Proxy(credentials=FakeCredentials(), environ=environ).start("ab" * 32)
    [execution] = stand_in.resources("executions")
    assert result == {"target": "workflow", "execution": execution["name"], "reconciled": False}


@pytest.mark.parametrize("raw", ["soon", "0", "-1"])
def test_a_timeout_that_is_not_a_positive_number_is_a_config_error(stand_in, raw):
    environ = {
        "RUNONCE_TARGET": json.dumps({"kind": "workflow", "workflow": WORKFLOW}),
        "RUNONCE_TARGET_BASE_URL": stand_in.url,
        "RUNONCE_TARGET_TIMEOUT_SECONDS": raw,
    }
    with pytest.raises(ConfigError, match="RUNONCE_TARGET_TIMEOUT_SECONDS"):
        Proxy(credentials=FakeCredentials(), environ=environ).start("ab" * 32)
    assert stand_in.calls == []
