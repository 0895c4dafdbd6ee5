"""Settings: environment, decorator overrides, and errors that name the setting and the fix."""

import pytest

from runonce.core.errors import ConfigError
from runonce.core.settings import load_settings

pytestmark = pytest.mark.fast  # no store: the decision logic alone


def test_defaults_apply_when_nothing_is_set():
    settings = load_settings({}, environ={})
    assert settings.collection == "scheduler_runs"
    assert settings.database == "(default)"
    assert settings.lease.total_seconds() == 900
    assert settings.retention.total_seconds() == 7 * 24 * 3600
    assert settings.project is None


def test_environment_is_read():
    settings = load_settings(
        {},
        environ={
            "RUNONCE_LEASE_SECONDS": "360",
            "RUNONCE_RETENTION_SECONDS": "86400",
            "RUNONCE_COLLECTION": "runs",
            "RUNONCE_DATABASE": "runonce",
            "GOOGLE_CLOUD_PROJECT": "acme",
        },
    )
    assert (settings.lease.total_seconds(), settings.retention.total_seconds()) == (360, 86400)
    assert (settings.collection, settings.database, settings.project) == ("runs", "runonce", "acme")


def test_decorator_options_override_the_environment():
    settings = load_settings({"lease": 30, "collection": "other"}, environ={"RUNONCE_LEASE_SECONDS": "360"})
    assert settings.lease.total_seconds() == 30
    assert settings.collection == "other"


@pytest.mark.parametrize(
    "environ, named",
    [
        ({"RUNONCE_LEASE_SECONDS": "ten"}, "RUNONCE_LEASE_SECONDS='ten' is not a whole number"),
        ({"RUNONCE_LEASE_SECONDS": "0"}, "RUNONCE_LEASE_SECONDS=0 is out of range"),
        ({"RUNONCE_RETENTION_SECONDS": "5"}, "RUNONCE_RETENTION_SECONDS=5 is out of range"),
        (
            {"RUNONCE_LEASE_SECONDS": "7200", "RUNONCE_RETENTION_SECONDS": "3600"},
            "must be longer than the lease",
        ),
        ({"RUNONCE_COLLECTION": "a/b"}, "RUNONCE_COLLECTION='a/b' is not a Firestore collection id"),
        ({"RUNONCE_COLLECTION": "."}, "RUNONCE_COLLECTION='.' is not a Firestore collection id"),
        ({"RUNONCE_COLLECTION": ".."}, "RUNONCE_COLLECTION='..' is not a Firestore collection id"),
        (
            {"RUNONCE_COLLECTION": "runs "},
            "RUNONCE_COLLECTION='runs ' is not a Firestore collection id: it has spaces",
        ),
        ({"RUNONCE_LEASE_SECONDS": "1_000"}, "RUNONCE_LEASE_SECONDS='1_000' is not a whole number"),
        ({"RUNONCE_DATABASE": "Bad_Name"}, "RUNONCE_DATABASE='Bad_Name' is not a Firestore database id"),
    ],
)
def test_invalid_environment_is_reported_with_the_variable(environ, named):
    with pytest.raises(ConfigError, match=named.replace("(", r"\(").replace(")", r"\)")):
        load_settings({}, environ=environ)


def test_invalid_option_is_reported_as_a_decorator_option():
    with pytest.raises(ConfigError, match=r"lease \(decorator option\)=-1 is out of range"):
        load_settings({"lease": -1}, environ={})


def test_the_store_option_chooses_the_store_when_runonce_store_is_unset():
    settings = load_settings({"store": "valkey://10.0.0.3:6379"}, environ={})
    assert settings.store == "valkey://10.0.0.3:6379"


@pytest.mark.parametrize(
    ("option", "variable"),
    [("valkey://10.0.0.3:6379", " valkey://10.0.0.3:6379 "), ("FIRESTORE", "firestore")],
)
def test_the_store_option_and_runonce_store_naming_the_same_store_agree(option, variable):
    assert (
        load_settings({"store": option}, environ={"RUNONCE_STORE": variable}).store
        == variable.strip().lower()
    )


@pytest.mark.parametrize(
    ("option", "variable", "named"),
    [
        (
            "valkey://runner:s3cret@10.0.0.3:6379",
            "firestore",
            "the run store is 'valkey://runner:***@10.0.0.3:6379' by the decorator option store= but "
            "'firestore' by RUNONCE_STORE: give it in one place",
        ),
        (
            "firestore",
            "valkey://10.0.0.3:6379",
            "the run store is 'firestore' by the decorator option store= but 'valkey://10.0.0.3:6379' by "
            "RUNONCE_STORE",
        ),
        (
            "valkey://10.0.0.3:6379",
            "valkey://10.0.0.4:6379",
            "'valkey://10.0.0.3:6379' by the decorator option store= but 'valkey://10.0.0.4:6379' by",
        ),
    ],
)
def test_the_store_option_contradicting_runonce_store_is_a_config_error_naming_both(option, variable, named):
    with pytest.raises(ConfigError) as raised:
        load_settings({"store": option}, environ={"RUNONCE_STORE": variable})
    assert named in str(raised.value)
    assert "s3cret" not in str(raised.value)


@pytest.mark.parametrize(
    ("overrides", "environ", "named"),
    [
        ({"store": "redis://10.0.0.3"}, {}, "store (decorator option)='redis://10.0.0.3' names no run store"),
        (
            {"store": "valkey://10.0.0.3:6379"},
            {"RUNONCE_STORE": "memcache"},
            "RUNONCE_STORE='memcache' names no run store",
        ),
    ],
)
def test_a_store_option_or_variable_naming_no_store_is_reported_with_its_name(overrides, environ, named):
    with pytest.raises(ConfigError) as raised:
        load_settings(overrides, environ=environ)
    assert named in str(raised.value)
