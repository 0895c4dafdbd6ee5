"""Defect class 9: bad inputs get a 4xx or `misconfigured` naming the fix, never an HTML 500; and
`current_run()` in threads the job starts."""

from __future__ import annotations

import contextvars
import threading
from concurrent.futures import ThreadPoolExecutor

import flask
import pytest

import runonce
from runonce.core.errors import ConfigError
from runonce.core.settings import load_settings

from .conftest import scheduler_headers


@pytest.mark.parametrize(
    "time",
    [
        "9999-12-31T23:59:59-01:00",
        "0001-01-01T00:00:00+01:00",
        "２０２６-11-29T03:00:00Z",
        "2026-11-29T03:00:0٠Z",
    ],
    ids=["past year 9999 in UTC", "before year 1 in UTC", "full-width digits", "arabic-indic digit"],
)
@pytest.mark.both_stores
def test_a_schedule_time_that_is_no_usable_instant_is_rejected_with_400(client, probe, records, time):
    response = client.post("/", headers=scheduler_headers(time=time))
    assert response.status_code == 400 and response.json["outcome"] == "rejected"
    assert response.json["error"].startswith("X-CloudScheduler-ScheduleTime")
    assert probe.count == 0 and records() == []


@pytest.mark.parametrize("collection", [".", "..", " runs", "runs ", "__runs__", "a/b", ""])
def test_a_collection_firestore_cannot_have_is_misconfigured(tapped_client, probe, collection):
    handler = runonce.deduplicated(collection=collection, client=tapped_client)(probe)
    app = flask.Flask(__name__)
    app.add_url_rule("/", "h", lambda: handler(flask.request._get_current_object()), methods=["POST"])
    response = app.test_client().post("/", headers=scheduler_headers())
    assert response.status_code == 500 and response.json["outcome"] == "misconfigured"
    assert "is not a Firestore collection id" in response.json["error"]
    assert probe.count == 0


def _serve_without_client(probe):
    handler = runonce.deduplicated(collection="runs")(probe)
    app = flask.Flask(__name__)
    app.add_url_rule("/", "h", lambda: handler(flask.request._get_current_object()), methods=["POST"])
    return app.test_client()


@pytest.fixture
def no_google_environment(monkeypatch, tmp_path):
    """No emulator, no project, no gcloud configuration, no metadata server to ask."""
    for name in (
        "FIRESTORE_EMULATOR_HOST",
        "GOOGLE_CLOUD_PROJECT",
        "GCLOUD_PROJECT",
        "CLOUDSDK_CORE_PROJECT",
    ):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("CLOUDSDK_CONFIG", str(tmp_path / "gcloud"))
    monkeypatch.setenv("NO_GCE_CHECK", "True")
    monkeypatch.setenv("GCE_METADATA_HOST", "127.0.0.1:9")
    return tmp_path


def test_no_credentials_is_misconfigured_naming_what_to_set(no_google_environment, monkeypatch, probe):
    monkeypatch.setenv("GOOGLE_APPLICATION_CREDENTIALS", str(no_google_environment / "missing.json"))
    response = _serve_without_client(probe).post("/", headers=scheduler_headers())
    assert response.status_code == 500 and response.json["outcome"] == "misconfigured"
    assert "no Google Cloud credentials" in response.json["error"]
    assert "GOOGLE_APPLICATION_CREDENTIALS" in response.json["error"]
    assert probe.count == 0


def test_no_project_is_misconfigured_naming_what_to_set(no_google_environment, monkeypatch, probe):
    key = no_google_environment / "user.json"
    key.write_text(
        '{"type": "authorized_user", "client_id": "x.apps.googleusercontent.com",'
        ' "client_secret": "s", "refresh_token": "r"}'
    )
    monkeypatch.setenv("GOOGLE_APPLICATION_CREDENTIALS", str(key))
    response = _serve_without_client(probe).post("/", headers=scheduler_headers())
    assert response.status_code == 500 and response.json["outcome"] == "misconfigured"
    assert "set GOOGLE_CLOUD_PROJECT" in response.json["error"]
    assert probe.count == 0


@pytest.mark.parametrize("raw", ["1_000", "١٢٠", "１２０", "+120", "1e3", "120.0", "0x78", ""])
@pytest.mark.fast
def test_a_number_that_is_not_plain_digits_is_refused(raw):
    with pytest.raises(ConfigError, match="is not a whole number of seconds; set it to plain digits"):
        load_settings({}, environ={"RUNONCE_LEASE_SECONDS": raw})


@pytest.mark.fast
def test_a_boolean_option_is_not_taken_for_a_number():
    with pytest.raises(ConfigError, match=r"lease \(decorator option\)=True is not a whole number"):
        load_settings({"lease": True}, environ={})


@pytest.mark.parametrize(
    "variable, example",
    [
        ("RUNONCE_LEASE_SECONDS", "e.g. 900"),
        ("RUNONCE_RETENTION_SECONDS", "e.g. 604800"),
        ("RUNONCE_FORCED_SKEW_SECONDS", "e.g. 60"),
    ],
)
@pytest.mark.fast
def test_the_hint_for_a_bad_number_is_its_default(variable, example):
    with pytest.raises(ConfigError) as caught:
        load_settings({}, environ={variable: "soon"})
    assert str(caught.value).endswith(example)
    assert "e.g. 0" not in str(caught.value)


@pytest.mark.fast
def test_a_huge_bad_setting_is_quoted_short():
    with pytest.raises(ConfigError) as caught:
        load_settings({}, environ={"RUNONCE_COLLECTION": "a/" * 100_000})
    assert len(str(caught.value)) < 400


@pytest.mark.both_stores
def test_current_run_in_a_thread_the_job_starts_with_its_context(client, probe):
    seen: list[object] = []

    def job(request):
        context = contextvars.copy_context()
        thread = threading.Thread(target=context.run, args=(lambda: seen.append(runonce.current_run()),))
        thread.start()
        thread.join()
        with ThreadPoolExecutor(1) as pool:
            seen.append(pool.submit(contextvars.copy_context().run, runonce.current_run).result())
        return "ok"

    probe.behaviour = job
    client.post("/", headers=scheduler_headers())
    assert seen == [probe.runs[0], probe.runs[0]]


@pytest.mark.both_stores
def test_current_run_in_a_thread_without_the_context_says_how_to_give_it(client, probe):
    errors: list[BaseException] = []

    def job(request):
        def work():
            try:
                runonce.current_run()
            except RuntimeError as exc:
                errors.append(exc)

        thread = threading.Thread(target=work)
        thread.start()
        thread.join()

    probe.behaviour = job
    client.post("/", headers=scheduler_headers())
    [error] = errors
    assert "contextvars.copy_context().run" in str(error)
