"""Every filter the synthesized stacks write, applied to the log lines the library really writes.

The lines come from real decorated handlers run here on the in-memory store, one delivery per
outcome; each is stored as Cloud Logging stores a Cloud Run function's stdout JSON line (see
`stored`). The filters come from the synthesized JSON: the log-based metrics' `filter`, the alert
conditions' `condition_matched_log.filter` and `condition_threshold.filter`, and the dashboard's
chart filters. Terraform references in them are replaced by the values the APIs return
(`API_VALUES`), and what remains inside `${...}` is evaluated by `terraform console` (offline, no
provider), so the oracle reads each filter as Google receives it at apply time. The filter reader
is tests/stacks/logquery.py; docs/monitoring.md ("Checked offline") says what this proves.
"""

from __future__ import annotations

import contextlib
import io
import json
import re
import shutil
import subprocess
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, replace
from datetime import date, timedelta
from pathlib import Path
from typing import Any

import flask
import pytest

import runonce
from runonce import OutcomeUnknown, PermanentError
from runonce._instant import parse_instant
from runonce.contract import (
    CALENDAR_HEADER,
    JOB_HEADER,
    JOB_VARIABLE,
    LOCATION_HEADER,
    MISSED_RUN_FIELD,
    OVERLAP_HEADER,
    PROJECT_HEADER,
    WATCHDOG_LOGGER,
    MissedRun,
)
from runonce.core.errors import ConfigError, StoreUnavailable
from runonce.core.outcomes import Outcome
from runonce.core.settings import DEFAULT_RETENTION_SECONDS
from runonce.core.store import CAUSE_FIELD, EXPECTED_ATTEMPT_FIELD, EXPECTED_STATUS_FIELD
from runonce.events import adapter as event_adapter
from runonce.events.adapter import EventSetup
from runonce.scheduler import adapter as scheduled_adapter
from runonce.scheduler.exclusion import JobCalendar
from runonce.scheduler.expected import scheduled_key
from runonce.scheduler.keys import rerun_slot
from runonce.scheduler.watchdog import Missed, Watch, WatchedJob, report
from runonce.store.memory import MemoryStore
from stacks import naming
from stacks.constructs.monitoring import (
    CATCH_UP,
    CAUSE,
    EXCLUDED,
    GAE_APP,
    LOG_METRIC_PREFIX,
    NOT_RUN_OUTCOMES,
    RETRY_OUTCOMES,
    RUN_REVISION,
    SKIPPED,
    WAITING,
)
from stacks.constructs.monitoring.filters import PAUSED
from stacks.team import Team, load_team_file
from tests.conftest import SCHEDULED, ManualClock
from tests.core.conftest import MemoryConnection, scheduler_headers
from tests.events.conftest import Copy, MemoryEventConnection, RecordedDeadLetters, envelope
from tests.stacks.conftest import Synthesized, synthesize
from tests.stacks.logquery import matches

LEASE = timedelta(seconds=120)
RETENTION = timedelta(seconds=DEFAULT_RETENTION_SECONDS)
REFERENCE = re.compile(r"(?<![\w.])(google_[a-z0-9_]+)\.([A-Za-z0-9_-]+)\.([A-Za-z0-9_.\[\]]+)")
"""A reference to a resource's attribute inside `${...}`."""
LOCAL = re.compile(r"\$\{local\.([A-Za-z0-9_-]+)\}")
SPECIAL_FIELDS = (
    "severity",
    "httpRequest",
    "time",
    "timestamp",
    "timestampSeconds",
    "timestampNanos",
    "logging.googleapis.com/insertId",
    "logging.googleapis.com/labels",
    "logging.googleapis.com/operation",
    "logging.googleapis.com/sourceLocation",
    "logging.googleapis.com/spanId",
    "logging.googleapis.com/trace",
    "logging.googleapis.com/trace_sampled",
)
"""The fields of a JSON line that Cloud Logging lifts out of `jsonPayload` into the LogEntry
(Cloud Logging's "Structured logging" page, "Special JSON fields in messages"); `message` stays."""


def _service_full_name(config: Mapping[str, Any]) -> str:
    return f"projects/{config['project']}/locations/{config['location']}/services/{config['name']}"


API_VALUES: dict[tuple[str, str], Callable[[Mapping[str, Any]], str]] = {
    # Functions API `ServiceConfig.service`: "Name of the service associated with a Function. The
    # format of this field is projects/{project}/locations/{region}/services/{service}"; the
    # service is named after the function (google provider issue 20320; the API bodies in
    # firebase-tools issues 7369 and 8841: functions/NAME has services/NAME).
    ("google_cloudfunctions2_function", "service_config[0].service"): _service_full_name,
}
"""The value the API returns for each resource attribute a filter uses, from the resource's
arguments (docs/monitoring.md, "Which service a filter names")."""


# ---------------------------------------------------------------------------------------------
# The lines the library writes, one delivery per outcome.


@dataclass(frozen=True)
class Delivery:
    """One delivery the library answered, and every line it wrote while answering it."""

    name: str
    kind: str
    """"scheduled", "event" or "watchdog"."""
    outcome: str
    """What the delivery was answered ("" for the watchdog's line)."""
    lines: tuple[dict[str, Any], ...]


def _lines(text: str) -> tuple[dict[str, Any], ...]:
    return tuple(json.loads(line) for line in text.splitlines() if line.startswith("{"))


def _flask(handler: Callable[[flask.Request], Any]) -> flask.testing.FlaskClient:
    app = flask.Flask("oracle")
    app.add_url_rule("/", "handle", lambda: handler(flask.request._get_current_object()), methods=["POST"])
    return app.test_client()


class _DownStore(MemoryStore):
    def claim(self, key, fields):
        raise StoreUnavailable("the store did not answer (deadline exceeded)")


class _RefusingConnection:
    def __init__(self, overrides, client):
        pass

    def get(self):
        raise ConfigError("RUNONCE_LEASE_SECONDS is not a whole number of seconds: set it to 30-3600")


class _FailingDeadLetters(RecordedDeadLetters):
    def _publish(self, data: bytes, attributes: dict[str, str]) -> str:
        raise RuntimeError("NotFound: the dead-letter topic does not exist")


class _UnforwardingConnection(MemoryEventConnection):
    """An event connection whose dead-letter topic refuses every copy."""

    def get(self) -> EventSetup:
        made = super().get()
        return EventSetup(made.base, made.settings, _FailingDeadLetters(made.settings.dead_letter_topic, []))


def _deliveries(monkeypatch: pytest.MonkeyPatch) -> Iterator[Delivery]:
    clock = ManualClock(SCHEDULED + timedelta(seconds=5))
    runonce.set_clock(clock)
    try:
        yield from _scheduled(monkeypatch, clock)
        yield from _events(monkeypatch)
        yield _missed_run(clock)
    finally:
        runonce.set_clock(None)


def _answered(name: str, kind: str, send: Callable[[], Any]) -> Delivery:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        response = send()
    return Delivery(name, kind, response.json["outcome"], _lines(out.getvalue()))


def _scheduled(monkeypatch: pytest.MonkeyPatch, clock: ManualClock) -> Iterator[Delivery]:
    store = MemoryStore(LEASE, RETENTION, clock)

    def client(job: Callable[[flask.Request], Any], connection: Any = None) -> flask.testing.FlaskClient:
        monkeypatch.setattr(
            scheduled_adapter,
            "Connection",
            connection or (lambda overrides, client: MemoryConnection(store, overrides)),
        )
        handler = runonce.deduplicated(collection="runs", client=None, lease=int(LEASE.total_seconds()))(job)
        return _flask(handler)

    def send(app: flask.testing.FlaskClient, time: str) -> Callable[[], Any]:
        return lambda: app.post("/", headers=scheduler_headers(time=time))

    def fail(request):
        raise PermanentError("the report's source table is gone")

    def crash(request):
        raise RuntimeError("connection reset")

    def unsure(request):
        raise OutcomeUnknown("the upload's answer was lost", hold_seconds=60)

    done = client(lambda request: {"rows": 42})
    yield _answered("scheduled completed", "scheduled", send(done, "2026-11-29T03:00:00Z"))
    yield _answered("scheduled duplicate", "scheduled", send(done, "2026-11-29T03:00:00Z"))
    yield _answered("scheduled failed", "scheduled", send(client(fail), "2026-11-29T02:00:00Z"))
    yield _answered("scheduled retry", "scheduled", send(client(crash), "2026-11-29T01:00:00Z"))
    held = client(unsure)
    yield _answered("scheduled held", "scheduled", send(held, "2026-11-28T23:00:00Z"))
    yield _answered("scheduled in progress", "scheduled", send(held, "2026-11-28T23:00:00Z"))
    yield _answered("scheduled too old", "scheduled", send(done, "2026-11-20T03:00:00Z"))
    yield _answered("scheduled rejected", "scheduled", send(done, "not a time"))
    down = _DownStore(LEASE, RETENTION, clock)
    unavailable = client(lambda request: 1, lambda overrides, client: MemoryConnection(down, overrides))
    yield _answered("scheduled store unavailable", "scheduled", send(unavailable, "2026-11-28T22:00:00Z"))
    refused = client(lambda request: 1, _RefusingConnection)
    yield _answered("scheduled misconfigured", "scheduled", send(refused, "2026-11-28T21:00:00Z"))

    def overlapping(app: flask.testing.FlaskClient, time: str, policy: str) -> Callable[[], Any]:
        headers = {**scheduler_headers(job="overlapping-report", time=time), OVERLAP_HEADER: policy}
        return lambda: app.post("/", headers=headers)

    # A run of a `skip` job holding the job, then a later run of it under each policy: the library
    # answers them `skipped` and `waiting` (docs/stacks/schedules.md, "Metrics and alerts").
    yield _answered(
        "scheduled holding its job", "scheduled", overlapping(held, "2026-11-28T20:00:00Z", "skip")
    )
    yield _answered(
        "scheduled skip while held", "scheduled", overlapping(done, "2026-11-28T19:00:00Z", "skip")
    )
    yield _answered(
        "scheduled wait while held", "scheduled", overlapping(done, "2026-11-28T18:00:00Z", "wait")
    )

    # A run on a date its job's calendar excludes: answered `excluded`, recorded, never run.
    holiday = JobCalendar("Etc/UTC", excluded=frozenset({date(2026, 11, 28)}))
    excluded = {**scheduler_headers(time="2026-11-28T16:00:00Z"), CALENDAR_HEADER: holiday.header_value()}
    yield _answered("scheduled excluded", "scheduled", lambda: done.post("/", headers=excluded))

    def requested(cause: str | None, run_time: str, forced_time: str) -> Callable[[], Any]:
        """A request filed as `runonce rerun` (cause None), `runonce backfill` or the watchdog's
        catch-up files it, then the forced delivery `jobs.run` sends, which runs the requested run."""

        def send() -> Any:
            headers = scheduler_headers(time=forced_time)
            job, project, location = (headers[name] for name in (JOB_HEADER, PROJECT_HEADER, LOCATION_HEADER))
            run = scheduled_key(job, parse_instant(run_time).utc, project, location)
            fields: dict[str, Any] = {
                "by": "ops@example.com",
                "schedule_time": run_time,
                "scheduler_job": job,
            }
            if cause is not None:
                fields |= {CAUSE_FIELD: cause, EXPECTED_ATTEMPT_FIELD: None, EXPECTED_STATUS_FIELD: None}
            slot = rerun_slot(project, location, job)
            store.request_rerun(slot, run, fields, cause is None, timedelta(minutes=10))
            return done.post("/", headers=headers)

        return send

    # Runs a request started (docs/schedules/backfill.md): never delivered (no record) for a backfill and a
    # catch-up, the completed run above for a re-run; each by its own forced delivery.
    yield _answered(
        "scheduled backfilled",
        "scheduled",
        requested("backfill", "2026-11-29T00:00:00Z", "2026-11-29T04:00:00Z"),
    )
    yield _answered(
        "scheduled caught up",
        "scheduled",
        requested("catch_up", "2026-11-28T17:00:00Z", "2026-11-29T05:00:00Z"),
    )
    yield _answered(
        "scheduled re-run", "scheduled", requested(None, "2026-11-29T03:00:00Z", "2026-11-29T06:00:00Z")
    )


EVENT_JOB = "orders"
"""The event job the event deliveries are for, as the stack names it in the function's RUNONCE_JOB."""


def _events(monkeypatch: pytest.MonkeyPatch) -> Iterator[Delivery]:
    store = MemoryStore(timedelta(seconds=60), RETENTION, runonce._clock.now)
    copies: list[Copy] = []
    monkeypatch.setenv(JOB_VARIABLE, EVENT_JOB)

    def client(job: Callable[[Any], Any], failing: bool = False, **options: Any) -> flask.testing.FlaskClient:
        kind = _UnforwardingConnection if failing else MemoryEventConnection
        monkeypatch.setattr(
            event_adapter, "EventConnection", lambda overrides, client: kind(store, overrides, copies)
        )
        topic = "projects/runonce-local/topics/example-orders-dead-letter"
        handler = runonce.deduplicated_event(
            collection="events", client=None, dead_letter_topic=topic, lease=60, **options
        )(job)
        return _flask(handler)

    def post(app: flask.testing.FlaskClient, body: dict) -> Callable[[], Any]:
        return lambda: app.post("/", data=json.dumps(body), content_type="application/json")

    def refuse(event):
        raise PermanentError("order 7 has no customer")

    def message(number: int, age: float = 1.0) -> dict:
        return envelope(message_id=str(number), publish_time=runonce._clock.now() - timedelta(seconds=age))

    done = client(lambda event: {"seen": event.id})
    yield _answered("event completed", "event", post(done, message(1)))
    yield _answered("event duplicate", "event", post(done, message(1)))
    yield _answered("event failed", "event", post(client(refuse), message(2)))
    old = message(3, age=700)
    yield _answered("event too old", "event", post(client(lambda event: 1, max_event_age=600), old))
    unforwarded = client(refuse, failing=True)
    yield _answered("event dead letter failed", "event", post(unforwarded, message(4)))


def _missed_run(clock: ManualClock) -> Delivery:
    job = WatchedJob(
        job="report",
        scheduler_job=naming.scheduler_job_name("example", "report"),
        schedule="0 3 * * *",
        time_zone="UTC",
        grace=timedelta(minutes=30),
        lookback=timedelta(days=1),
        since=SCHEDULED - timedelta(days=30),
    )
    watch = Watch(team="example", project="runonce-example", location="europe-west1", jobs=(job,))
    missed = Missed(job, SCHEDULED, "0" * 64, MissedRun.NEVER_DELIVERED)
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert report(watch, missed, MemoryStore(LEASE, RETENTION, clock))
    return Delivery("watchdog missed run", "watchdog", "", _lines(out.getvalue()))


@pytest.fixture(scope="module")
def deliveries() -> list[Delivery]:
    """Every delivery, with the lines the library wrote for it (run once for the module)."""
    with pytest.MonkeyPatch.context() as monkeypatch:
        made = list(_deliveries(monkeypatch))
    expected = {outcome.label for outcome in Outcome} - {"error"}
    assert {delivery.outcome for delivery in made} >= expected, "an outcome has no delivery here"
    return made


# ---------------------------------------------------------------------------------------------
# Log entries and time series as the APIs return them.


def stored(line: Mapping[str, Any], service: str, project: str, region: str) -> dict[str, Any]:
    """A JSON line a Cloud Run function wrote to stdout, as Cloud Logging stores it: under the
    `cloud_run_revision` resource with its five labels (Cloud Monitoring's resource list,
    `cloud_run_revision`: project_id, service_name, revision_name, location, configuration_name),
    its special fields lifted into the entry, the rest as `jsonPayload`."""
    entry: dict[str, Any] = {
        "logName": f"projects/{project}/logs/run.googleapis.com%2Fstdout",
        "resource": {
            "type": RUN_REVISION,
            "labels": {
                "project_id": project,
                "service_name": service,
                "revision_name": f"{service}-00001-abc",
                "location": region,
                "configuration_name": service,
            },
        },
        "severity": line.get("severity", "DEFAULT"),
        "jsonPayload": {key: value for key, value in line.items() if key not in SPECIAL_FIELDS},
    }
    if "logging.googleapis.com/trace" in line:
        entry["trace"] = line["logging.googleapis.com/trace"]
    return entry


def extracted(entry: Mapping[str, Any], extractors: Mapping[str, str]) -> dict[str, str]:
    """A log-based metric's labels for an entry: `EXTRACT(jsonPayload.FIELD)` of each."""
    labels = {}
    for key, expression in extractors.items():
        match = re.fullmatch(r"EXTRACT\(jsonPayload\.([A-Za-z0-9_]+)\)", expression)
        assert match, f"label extractor {expression!r} is not read here"
        value = entry["jsonPayload"].get(match.group(1))
        if value is not None:
            labels[key] = str(value)
    return labels


# ---------------------------------------------------------------------------------------------
# The filters, as Google receives them at apply time.


@dataclass(frozen=True)
class Applied:
    """One stack's filters evaluated as at apply time, and what the oracle needs beside them."""

    synth: Synthesized
    metrics: dict[str, dict[str, Any]]
    """Each log-based metric by name: its filter evaluated, its label extractors."""
    log_matches: dict[str, str]
    """Each log-match condition's filter, by policy title."""
    thresholds: dict[str, str]
    """Each threshold condition's filter, by condition name."""
    dashboard: dict[str, Any]
    """The dashboard's JSON, evaluated and parsed."""

    @property
    def services(self) -> dict[str, str]:
        """The short name of each function's service (the function's name), by function name."""
        return {
            config["name"]: config["name"]
            for config in self.synth.resources("google_cloudfunctions2_function").values()
        }

    @property
    def project(self) -> str:
        return self.synth.team.project

    @property
    def region(self) -> str:
        return self.synth.team.region


def api_value(document: Mapping[str, Any], match: re.Match[str]) -> str:
    """The value the API returns for one reference, as an HCL string literal."""
    kind, name, attribute = match.groups()
    make = API_VALUES.get((kind, attribute))
    assert make is not None, (
        f"a filter uses {kind}.{attribute}, whose value at apply time is not documented in "
        f"API_VALUES: add it with its source"
    )
    return json.dumps(make(document["resource"][kind][name]))


def evaluate(document: Mapping[str, Any], templates: Mapping[str, str]) -> dict[str, str]:
    """The templates (strings of the synthesized JSON, with `${...}`) as Terraform evaluates them,
    references replaced by the APIs' values, by one offline `terraform console`."""
    terraform = shutil.which("terraform")
    if terraform is None:
        pytest.fail("terraform is not on PATH: the oracle evaluates the filters with terraform console")
    used = {name for text in templates.values() for name in LOCAL.findall(text)}
    locals_ = {
        name: REFERENCE.sub(lambda m: api_value(document, m), document["locals"][name]) for name in used
    }
    for name, value in locals_.items():
        assert "${local." not in value, f"local {name} refers to another local: not read here"
    templates = {
        key: REFERENCE.sub(lambda m: api_value(document, m), text) for key, text in templates.items()
    }
    workdir = Path(document["__workdir"])
    (workdir / "main.tf.json").write_text(
        json.dumps({"locals": {**locals_, "oracle_templates": dict(templates)}})
    )
    result = subprocess.run(
        [terraform, "console"],
        input="jsonencode(local.oracle_templates)\n",
        capture_output=True,
        text=True,
        cwd=workdir,
        env={"CHECKPOINT_DISABLE": "1", "TF_IN_AUTOMATION": "1", "PATH": "/usr/bin:/bin"},
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    (printed,) = [line for line in result.stdout.splitlines() if line.strip()]
    return json.loads(json.loads(printed))


def applied(synth: Synthesized, workdir: Path) -> Applied:
    document = {**synth.document, "__workdir": str(workdir)}
    templates: dict[str, str] = {}
    extractors = {}
    for config in synth.resources("google_logging_metric").values():
        templates[f"metric {config['name']}"] = config["filter"]
        extractors[config["name"]] = config.get("label_extractors", {})
    for config in synth.resources("google_monitoring_alert_policy").values():
        for condition in config["conditions"]:
            if "condition_matched_log" in condition:
                templates[f"log {config['display_name']}"] = condition["condition_matched_log"]["filter"]
            if "condition_threshold" in condition:
                templates[f"threshold {condition['display_name']}"] = condition["condition_threshold"][
                    "filter"
                ]
    (dashboard,) = synth.resources("google_monitoring_dashboard").values()
    templates["dashboard"] = dashboard["dashboard_json"]
    values = evaluate(document, templates)
    prefix = f"runonce {synth.team.name}: "
    return Applied(
        synth,
        {
            name: {"filter": values[f"metric {name}"], "label_extractors": extractors[name]}
            for name in extractors
        },
        {
            key.removeprefix("log ").removeprefix(prefix): text
            for key, text in values.items()
            if key.startswith("log ")
        },
        {
            key.removeprefix("threshold "): text
            for key, text in values.items()
            if key.startswith("threshold ")
        },
        json.loads(values["dashboard"]),
    )


@pytest.fixture(scope="module", params=["example", "payments"])
def stack(request, tmp_path_factory) -> Applied:
    """A team's stack with its filters evaluated as at apply time."""
    return applied(
        request.getfixturevalue(request.param), tmp_path_factory.mktemp(f"console-{request.param}")
    )


# ---------------------------------------------------------------------------------------------
# What each filter must match.

OTHER_SERVICE = "another-team-report"
"""A function of another team in the same project: its lines match none of this team's filters."""


def entries(stack: Applied, deliveries: list[Delivery]) -> list[tuple[Delivery, str, dict[str, Any]]]:
    """Every line of every delivery, as written by each of the team's functions and by another
    team's (the watchdog's by the team's watchdog function only)."""
    services = [*stack.services.values(), OTHER_SERVICE]
    return [
        (delivery, service, stored(line, service, stack.project, stack.region))
        for delivery in deliveries
        for service in services
        for line in delivery.lines
    ]


def answers(stack: Applied, deliveries: list[Delivery]) -> list[tuple[Delivery, str, dict[str, Any]]]:
    """The entries the answers metric counts, by the oracle."""
    metric = stack.metrics[f"runonce-{stack.synth.team.name}-answers"]
    return [found for found in entries(stack, deliveries) if matches(metric["filter"], found[2])]


def test_every_filter_reads_as_the_logging_or_monitoring_language(stack):
    for metric in stack.metrics.values():
        matches(metric["filter"], {})
    for text in [*stack.log_matches.values()]:
        matches(text, {})
    for text in stack.thresholds.values():
        matches(text, {}, "monitoring")


def test_the_answers_metric_counts_each_delivery_of_the_teams_functions_once_with_its_outcome(
    stack, deliveries
):
    counted = answers(stack, deliveries)
    for delivery in deliveries:
        if delivery.kind == "watchdog":
            assert not [entry for found, _, entry in counted if found is delivery]
            continue
        for service in stack.services.values():
            lines = [entry for found, where, entry in counted if found is delivery and where == service]
            assert len(lines) == 1, (delivery.name, service, len(lines))
            assert lines[0]["jsonPayload"]["outcome"] == delivery.outcome, delivery.name
    assert not [entry for _, where, entry in counted if where == OTHER_SERVICE]


def test_a_failed_forwarding_is_counted_as_answered_dead_letter_failed(stack, deliveries):
    (delivery,) = [found for found in deliveries if found.outcome == "dead_letter_failed"]
    counted = [entry for found, where, entry in answers(stack, deliveries) if found is delivery]
    assert {entry["jsonPayload"]["outcome"] for entry in counted} == {"dead_letter_failed"}


def test_the_failed_run_alert_fires_once_on_runs_that_will_not_run_again_and_on_nothing_else(
    stack, deliveries
):
    condition = stack.log_matches["a run failed permanently"]
    for delivery in deliveries:
        # A failed event whose copy could not be forwarded is answered dead_letter_failed and
        # delivered again until its copy is forwarded: the dead-lettered alert is the one for it.
        will_not_run = delivery.outcome in ("failed", "too_old")
        for service in [*stack.services.values(), OTHER_SERVICE]:
            fired = [
                line
                for line in delivery.lines
                if matches(condition, stored(line, service, stack.project, stack.region))
            ]
            assert len(fired) == (1 if will_not_run and service != OTHER_SERVICE else 0), (
                delivery.name,
                service,
            )


def test_the_dead_letter_alert_and_metric_see_each_copy_and_each_failed_forwarding_of_the_event_functions(
    stack, deliveries
):
    team = stack.synth.team
    if not team.event_jobs:
        assert "an event was dead-lettered" not in stack.log_matches
        assert f"runonce-{team.name}-dead-letters" not in stack.metrics
        return
    event_services = {naming.function_name(team.name, job.name) for job in team.event_jobs}
    condition = stack.log_matches["an event was dead-lettered"]
    metric = stack.metrics[f"runonce-{team.name}-dead-letters"]
    for delivery in deliveries:
        for service in [*stack.services.values(), OTHER_SERVICE]:
            found = [
                entry
                for line in delivery.lines
                if matches(condition, entry := stored(line, service, stack.project, stack.region))
            ]
            counted = [
                extracted(entry, metric["label_extractors"])
                for line in delivery.lines
                if matches(metric["filter"], entry := stored(line, service, stack.project, stack.region))
            ]
            ours = service in event_services
            forwarded = delivery.kind == "event" and delivery.outcome in ("failed", "too_old")
            unforwarded = delivery.kind == "event" and delivery.outcome == "dead_letter_failed"
            assert bool(found) == (ours and (forwarded or unforwarded)), (delivery.name, service)
            assert len(counted) == (1 if ours and forwarded else 0), (delivery.name, service)
            for labels in counted:
                assert labels["outcome"] == delivery.outcome, delivery.name


def test_an_event_jobs_lines_carry_the_job_label_the_metrics_extract(deliveries):
    for delivery in deliveries:
        if delivery.kind == "event":
            assert [line.get("job") for line in delivery.lines] == [EVENT_JOB] * len(delivery.lines), (
                delivery.name
            )


def test_the_missed_run_metric_and_alert_see_the_watchdogs_line_about_the_teams_jobs_only(stack, deliveries):
    team = stack.synth.team
    if not team.jobs:
        return
    (watchdog,) = [delivery for delivery in deliveries if delivery.kind == "watchdog"]
    (line,) = watchdog.lines
    assert line["logger"] == WATCHDOG_LOGGER
    ours = {**line, "scheduler_job": naming.scheduler_job_name(team.name, team.jobs[0].name)}
    theirs = {**line, "scheduler_job": "another-team-report"}
    metric = stack.metrics[f"runonce-{team.name}-missed-runs"]["filter"]
    condition = stack.log_matches["a scheduled run was missed"]
    entry = stored(ours, naming.function_name(team.name, "watchdog"), stack.project, stack.region)
    other = stored(theirs, naming.function_name(team.name, "watchdog"), stack.project, stack.region)
    assert matches(metric, entry) and matches(condition, entry)
    assert not matches(metric, other) and not matches(condition, other)
    for delivery, _, found in entries(stack, deliveries):
        if delivery.kind != "watchdog":
            assert not matches(metric, found) and not matches(condition, found), delivery.name


def series(stack: Applied, deliveries: list[Delivery]) -> list[tuple[Delivery, dict[str, Any]]]:
    """The answers metric's time series points, one per counted entry: the metric's type, the
    labels extracted from the entry, and the entry's monitored resource."""
    name = f"runonce-{stack.synth.team.name}-answers"
    extractors = stack.metrics[name]["label_extractors"]
    return [
        (
            delivery,
            {
                "metric": {"type": f"{LOG_METRIC_PREFIX}{name}", "labels": extracted(entry, extractors)},
                "resource": entry["resource"],
            },
        )
        for delivery, _, entry in answers(stack, deliveries)
    ]


def test_the_sustained_alert_counts_misconfigured_and_store_unavailable_answers_only(stack, deliveries):
    points = series(stack, deliveries)
    for outcome in ("misconfigured", "store_unavailable"):
        condition = stack.thresholds[
            f"{outcome} answers for {stack.synth.team.alert_thresholds.sustained_seconds // 60} min"
        ]
        seen = {delivery.outcome for delivery, point in points if matches(condition, point, "monitoring")}
        assert seen == {outcome}


CHARTS: dict[str, Callable[[str], bool]] = {
    "Runs per job by outcome": lambda outcome: True,
    "Duplicates skipped (duplicate)": lambda outcome: outcome == "duplicate",
    "Held by another attempt (409 in_progress)": lambda outcome: outcome == "in_progress",
    "Answers that ask for a retry (5xx)": lambda outcome: (
        next(o for o in Outcome if o.label == outcome).status >= 500
    ),
    "Permanent failures (failed)": lambda outcome: outcome == "failed",
    f"Skipped by the overlap policy ({SKIPPED})": lambda outcome: outcome == SKIPPED,
    f"Waiting for the run before (409 {WAITING})": lambda outcome: outcome == WAITING,
    f"Excluded by the job's calendar ({EXCLUDED})": lambda outcome: outcome == EXCLUDED,
}
"""The answers each chart on the answers metric shows, by title."""


def chart_filters(stack: Applied) -> dict[str, list[str]]:
    return {
        tile["widget"]["title"]: [
            data["timeSeriesQuery"]["timeSeriesFilter"]["filter"]
            for data in tile["widget"]["xyChart"]["dataSets"]
        ]
        for tile in stack.dashboard["mosaicLayout"]["tiles"]
    }


def test_each_chart_of_the_answers_metric_shows_the_answers_it_is_named_for(stack, deliveries):
    charts = chart_filters(stack)
    points = series(stack, deliveries)
    for title, shows in CHARTS.items():
        seen = {
            delivery.outcome
            for delivery, point in points
            if any(matches(f, point, "monitoring") for f in charts[title])
        }
        assert seen == {delivery.outcome for delivery, _ in points if shows(delivery.outcome)}, title


def test_the_latency_chart_shows_each_function_of_the_team_and_no_other(stack):
    (filters,) = [
        found for title, found in chart_filters(stack).items() if title.startswith("Request latency")
    ]

    def latency(service: str) -> dict[str, Any]:
        labels = stored({}, service, stack.project, stack.region)["resource"]
        return {"metric": {"type": "run.googleapis.com/request_latencies"}, "resource": labels}

    for service in stack.services.values():
        assert sum(matches(f, latency(service), "monitoring") for f in filters) == 1, service
    assert not any(matches(f, latency(OTHER_SERVICE), "monitoring") for f in filters)


def test_the_dead_letter_backlog_charts_and_alerts_watch_the_stacks_own_subscriptions(stack):
    subscriptions = [
        config["name"] for config in stack.synth.resources("google_pubsub_subscription").values()
    ]
    watched = [
        *chart_filters(stack).get("Dead-letter backlog", []),
        *[t for n, t in stack.thresholds.items() if "dead" in n or "unacknowledged" in n],
    ]
    for text in watched:
        hits = [
            name
            for name in subscriptions
            for metric in ("num_undelivered_messages", "oldest_unacked_message_age")
            if matches(
                text,
                {
                    "metric": {"type": f"pubsub.googleapis.com/subscription/{metric}"},
                    "resource": {
                        "type": "pubsub_subscription",
                        "labels": {"project_id": stack.project, "subscription_id": name},
                    },
                },
                "monitoring",
            )
        ]
        assert len(hits) == 1, (text, hits)


def test_the_dashboard_waits_for_every_log_based_metric_it_charts(stack):
    ((name, dashboard),) = stack.synth.resources("google_monitoring_dashboard").items()
    charted = {
        match.group(1)
        for filters in chart_filters(stack).values()
        for text in filters
        if (match := re.search(rf'metric.type="{re.escape(LOG_METRIC_PREFIX)}([^"]+)"', text))
    }
    metrics = {config["name"]: key for key, config in stack.synth.resources("google_logging_metric").items()}
    assert charted and charted <= set(metrics), name
    assert {f"google_logging_metric.{metrics[metric]}" for metric in charted} <= set(dashboard["depends_on"])


# ---------------------------------------------------------------------------------------------
# Jobs on Cloud Run services and App Engine (the every-feature team): the library's lines are the
# same on every host; only the monitored resource they are stored under differs.

EVERY_FEATURE = Path(__file__).parent / "fixtures" / "every_feature.py"


def stored_on_app_engine(line: Mapping[str, Any], module: str, project: str) -> dict[str, Any]:
    """A JSON line an App Engine standard handler wrote to stdout, as Cloud Logging stores it:
    under the `gae_app` resource with its labels (Cloud Monitoring's resource list, `gae_app`:
    project_id, module_id, version_id, zone), the rest as `jsonPayload` as on Cloud Run."""
    entry = stored(line, module, project, "europe-west1")
    entry["logName"] = f"projects/{project}/logs/stdout"
    entry["resource"] = {
        "type": GAE_APP,
        "labels": {"project_id": project, "module_id": module, "version_id": "v7", "zone": "europe-west1-b"},
    }
    return entry


@pytest.fixture(scope="module")
def hosts(archive_dir, tmp_path_factory) -> Applied:
    """The every-feature stack (functions, a deployed and an existing Cloud Run service, App
    Engine jobs on two App Engine services), its filters evaluated as at apply time."""
    return applied(
        synthesize(load_team_file(EVERY_FEATURE), archive_dir), tmp_path_factory.mktemp("console-every")
    )


def host_entries(hosts: Applied, deliveries: list[Delivery]) -> list[tuple[Delivery, str, dict[str, Any]]]:
    """Every answered line as written on each Cloud Run service and App Engine service of the
    team, and on those of another team (another Cloud Run service, another App Engine service,
    and a Cloud Run service named like one of the team's App Engine services)."""
    team, project = hosts.synth.team, hosts.project
    modules = sorted({job.service for job in team.app_engine_jobs})
    places: list[tuple[str, Callable[[Mapping[str, Any]], dict[str, Any]]]] = [
        *(
            (f"run:{svc.name}", lambda line, name=svc.name: stored(line, name, project, hosts.region))
            for svc in team.services
        ),
        *(
            (f"gae:{module}", lambda line, name=module: stored_on_app_engine(line, name, project))
            for module in modules
        ),
        ("run:another-service", lambda line: stored(line, "another-service", project, hosts.region)),
        ("gae:another-module", lambda line: stored_on_app_engine(line, "another-module", project)),
        (f"run:{modules[0]}", lambda line: stored(line, modules[0], project, hosts.region)),
    ]
    return [
        (delivery, place, store(line))
        for delivery in deliveries
        if delivery.kind == "scheduled"
        for place, store in places
        for line in delivery.lines
    ]


def ours(hosts: Applied, place: str) -> bool:
    team = hosts.synth.team
    return place in {f"run:{svc.name}" for svc in team.services} | {
        f"gae:{job.service}" for job in team.app_engine_jobs
    }


def matched_per_place(
    hosts: Applied, deliveries: list[Delivery], filter_: str
) -> dict[tuple[int, str], list]:
    """The entries a filter matches, by (delivery, place), with an empty list where none does."""
    found: dict[tuple[int, str], list] = {}
    for delivery, place, entry in host_entries(hosts, deliveries):
        found.setdefault((id(delivery), place), [])
        if matches(filter_, entry):
            found[(id(delivery), place)].append(entry)
    return found


def test_the_answers_metric_counts_each_service_and_app_engine_answer_once(hosts, deliveries):
    metric = hosts.metrics[f"runonce-{hosts.synth.team.name}-answers"]
    outcomes = {id(delivery): delivery.outcome for delivery in deliveries}
    counted = matched_per_place(hosts, deliveries, metric["filter"])
    assert {place.split(":")[0] for _, place in counted if ours(hosts, place)} == {"run", "gae"}
    for (delivery, place), entries_ in counted.items():
        assert len(entries_) == (1 if ours(hosts, place) else 0), (outcomes[delivery], place)
        assert all(entry["jsonPayload"]["outcome"] == outcomes[delivery] for entry in entries_)


def test_the_latency_chart_shows_each_service_and_app_engine_service_of_the_team_and_no_other(hosts):
    (filters,) = [
        found for title, found in chart_filters(hosts).items() if title.startswith("Request latency")
    ]
    team, project = hosts.synth.team, hosts.project
    modules = sorted({job.service for job in team.app_engine_jobs})

    def on_run(service: str) -> dict[str, Any]:
        labels = stored({}, service, project, hosts.region)["resource"]
        return {"metric": {"type": "run.googleapis.com/request_latencies"}, "resource": labels}

    def on_app_engine(module: str) -> dict[str, Any]:
        labels = stored_on_app_engine({}, module, project)["resource"]
        return {
            "metric": {"type": "appengine.googleapis.com/http/server/response_latencies"},
            "resource": labels,
        }

    for point in [*(on_run(svc.name) for svc in team.services), *(on_app_engine(m) for m in modules)]:
        assert sum(matches(f, point, "monitoring") for f in filters) == 1, point["resource"]
    for stranger in (on_run("another-service"), on_app_engine("another-module"), on_run(modules[0])):
        assert not any(matches(f, stranger, "monitoring") for f in filters), stranger["resource"]


def test_the_failed_run_alert_fires_on_services_and_app_engine_runs_that_will_not_run_again(
    hosts, deliveries
):
    condition = hosts.log_matches["a run failed permanently"]
    outcomes = {id(delivery): delivery.outcome for delivery in deliveries}
    for (delivery, place), fired in matched_per_place(hosts, deliveries, condition).items():
        will_not_run = outcomes[delivery] in ("failed", "too_old")
        assert len(fired) == (1 if will_not_run and ours(hosts, place) else 0), (outcomes[delivery], place)


def test_the_sustained_alert_and_the_charts_see_app_engine_answers(hosts, deliveries):
    name = f"runonce-{hosts.synth.team.name}-answers"
    extractors = hosts.metrics[name]["label_extractors"]
    points = [
        (
            delivery,
            {
                "metric": {"type": f"{LOG_METRIC_PREFIX}{name}", "labels": extracted(entry, extractors)},
                "resource": entry["resource"],
            },
        )
        for delivery, place, entry in host_entries(hosts, deliveries)
        if place.startswith("gae:") and ours(hosts, place) and matches(hosts.metrics[name]["filter"], entry)
    ]
    assert points
    for outcome in ("misconfigured", "store_unavailable"):
        condition = hosts.thresholds[
            f"{outcome} answers for {hosts.synth.team.alert_thresholds.sustained_seconds // 60} min"
        ]
        assert {
            delivery.outcome for delivery, point in points if matches(condition, point, "monitoring")
        } == {outcome}
    (runs,) = chart_filters(hosts)["Runs per job by outcome"]
    assert all(matches(runs, point, "monitoring") for _, point in points)


def test_the_missed_run_metric_watches_the_service_and_app_engine_jobs(hosts, deliveries):
    team = hosts.synth.team
    (watchdog,) = [delivery for delivery in deliveries if delivery.kind == "watchdog"]
    (line,) = watchdog.lines
    metric = hosts.metrics[f"runonce-{team.name}-missed-runs"]["filter"]
    where = naming.function_name(team.name, "watchdog")
    for job in [*team.service_jobs, *team.app_engine_jobs]:
        entry = stored(
            {**line, "scheduler_job": naming.scheduler_job_name(team.name, job.name)},
            where,
            hosts.project,
            hosts.region,
        )
        assert matches(metric, entry), job.name


# ---------------------------------------------------------------------------------------------
# Overlap policies and catch-up (docs/stacks/schedules.md, "Metrics and alerts"). A skipped or
# waiting run is answered with a line like every other (its `outcome`, its `latency_ms`): the
# library's own, from the overlapping deliveries above. A run a request started carries the
# request's `cause` on its answer line (the library's, from the requested deliveries above), and
# the watchdog's lines about a catch-up carry `catch_up`.


def test_every_outcome_the_library_answers_is_one_the_monitoring_knows():
    # An outcome spelt otherwise than the monitoring's would be counted under a label no chart
    # or alert reads.
    known = {"completed", "duplicate", "in_progress", "rejected", SKIPPED, WAITING, EXCLUDED}
    labels = {outcome.label for outcome in Outcome}
    assert labels <= known | set(NOT_RUN_OUTCOMES) | set(RETRY_OUTCOMES)
    assert {SKIPPED, WAITING, EXCLUDED} <= labels


def answer_line(deliveries: list[Delivery], name: str) -> dict[str, Any]:
    """The line that answered the named delivery (the one with `latency_ms`)."""
    (delivery,) = [found for found in deliveries if found.name == name]
    (line,) = [line for line in delivery.lines if "latency_ms" in line]
    return line


def answer_variants(deliveries: list[Delivery]) -> dict[str, dict[str, Any]]:
    """The library's answer lines of a skipped run, a waiting run, a caught-up, a backfilled and
    a re-run run (each with its request's `cause`), and a plain one, by name."""
    done = answer_line(deliveries, "scheduled completed")
    return {
        "skipped": answer_line(deliveries, "scheduled skip while held"),
        "waiting": answer_line(deliveries, "scheduled wait while held"),
        "caught up": answer_line(deliveries, "scheduled caught up"),
        "backfilled": answer_line(deliveries, "scheduled backfilled"),
        "re-run": answer_line(deliveries, "scheduled re-run"),
        "plain": done,
    }


def points_of(stack: Applied, lines: dict[str, dict[str, Any]]) -> list[tuple[str, dict[str, Any]]]:
    """The answers metric's points for these lines, written by each of the team's functions."""
    name = f"runonce-{stack.synth.team.name}-answers"
    metric = stack.metrics[name]
    found = []
    for key, line in lines.items():
        for service in [*stack.services.values(), OTHER_SERVICE]:
            entry = stored(line, service, stack.project, stack.region)
            if matches(metric["filter"], entry):
                labels = extracted(entry, metric["label_extractors"])
                found.append(
                    (
                        key,
                        {
                            "metric": {"type": f"{LOG_METRIC_PREFIX}{name}", "labels": labels},
                            "resource": entry["resource"],
                        },
                    )
                )
    return found


def test_skipped_and_waiting_answers_are_counted_charted_apart_and_alert_nothing(stack, deliveries):
    variants = answer_variants(deliveries)
    assert (variants["skipped"]["outcome"], variants["waiting"]["outcome"]) == (SKIPPED, WAITING)
    points = points_of(stack, variants)
    assert {key for key, _ in points} == set(variants)  # each counted, on the team's functions only
    assert len(points) == len(variants) * len(stack.services)
    charts = chart_filters(stack)
    for title, key in (
        (f"Skipped by the overlap policy ({SKIPPED})", "skipped"),
        (f"Waiting for the run before (409 {WAITING})", "waiting"),
    ):
        (chart,) = charts[title]
        assert {found for found, point in points if matches(chart, point, "monitoring")} == {key}
    (runs,) = charts["Runs per job by outcome"]
    assert all(matches(runs, point, "monitoring") for _, point in points)
    alerting = [stack.log_matches["a run failed permanently"]]
    for key in ("skipped", "waiting"):
        for service in stack.services.values():
            entry = stored(variants[key], service, stack.project, stack.region)
            assert not any(matches(condition, entry) for condition in alerting), key
        for condition in stack.thresholds.values():
            assert not any(matches(condition, point, "monitoring") for found, point in points if found == key)


def test_caught_up_and_backfilled_runs_are_labelled_by_cause_and_charted_apart(stack, deliveries):
    points = points_of(stack, answer_variants(deliveries))
    causes = {found: point["metric"]["labels"].get(CAUSE) for found, point in points}
    assert causes["caught up"] == "catch_up" and causes["backfilled"] == "backfill"
    assert causes["plain"] is None
    (caught, backfilled) = chart_filters(stack)["Runs caught up or backfilled (cause)"]
    assert {found for found, point in points if matches(caught, point, "monitoring")} == {"caught up"}
    assert {found for found, point in points if matches(backfilled, point, "monitoring")} == {"backfilled"}


def watchdog_line(deliveries: list[Delivery], team: Team, job: str, **fields: Any) -> dict[str, Any]:
    """The watchdog's real missed-run line, about `job` of `team`, with these fields."""
    (watchdog,) = [delivery for delivery in deliveries if delivery.kind == "watchdog"]
    (line,) = watchdog.lines
    return {**line, "job": job, "scheduler_job": naming.scheduler_job_name(team.name, job), **fields}


def catch_up_lines(deliveries: list[Delivery], team: Team, job: str) -> dict[str, dict[str, Any]]:
    """The watchdog's lines about a missed run of `job`, by what became of it: its line about a
    catch-up it started (no `missed_run`: the run is not missed, WARNING), the missed run's ERROR
    line when the catch-up failed or its run was never delivered (with `catch_up` and why), and
    the plain missed-run line (outside the window)."""
    missed = watchdog_line(deliveries, team, job)
    started = {key: value for key, value in missed.items() if key != MISSED_RUN_FIELD}
    return {
        "started": {
            **started,
            "severity": "WARNING",
            CATCH_UP: "started",
            "caught_up": missed[MISSED_RUN_FIELD],
        },
        "failed": {**missed, CATCH_UP: "failed", "catch_up_error": "jobs.run failed: 403"},
        "not delivered": {**missed, CATCH_UP: "not_delivered", "catch_up_request": "r-1"},
        "missed": missed,
    }


def test_a_caught_up_run_is_not_missed_and_one_a_catch_up_did_not_run_is_missed_and_alerted(
    hosts, deliveries
):
    team = hosts.synth.team
    (caught,) = [job.name for job in team.scheduled_views if job.catch_up_seconds]
    where = naming.function_name(team.name, "watchdog")
    lines = catch_up_lines(deliveries, team, caught)
    found = {key: stored(line, where, hosts.project, hosts.region) for key, line in lines.items()}
    other = stored(
        {**lines["failed"], "scheduler_job": "another-team-report"}, where, hosts.project, hosts.region
    )
    missed_alert = hosts.log_matches["a scheduled run was missed"]
    missed_metric = hosts.metrics[f"runonce-{team.name}-missed-runs"]["filter"]
    catch_up_alert = hosts.log_matches["a catch-up did not run a missed run"]
    assert {key for key, entry in found.items() if matches(missed_alert, entry)} == {
        "failed",
        "not delivered",
        "missed",
    }
    assert {key for key, entry in found.items() if matches(missed_metric, entry)} == {
        "failed",
        "not delivered",
        "missed",
    }
    assert {key for key, entry in found.items() if matches(catch_up_alert, entry)} == {
        "failed",
        "not delivered",
    }
    assert not matches(catch_up_alert, other)
    for delivery, _, entry in entries(hosts, deliveries):
        assert not matches(catch_up_alert, entry), delivery.name


def test_a_team_without_catch_up_has_no_catch_up_alert(stack):
    assert all(job.catch_up_seconds == 0 for job in stack.synth.team.scheduled_views)
    assert "a catch-up did not run a missed run" not in stack.log_matches


# ---------------------------------------------------------------------------------------------
# A job paused after its runs kept failing (docs/schedules/pause.md): the alert
# matches the line the watchdog writes when it pauses one of the team's jobs, and no other line.


def _paused_line(team: Team, clock: ManualClock) -> dict[str, Any]:
    """The line the watchdog writes when it pauses the team's first job after its runs failed."""
    from runonce.scheduler.watchdog import check

    view = team.scheduled_views[0]
    job = WatchedJob(
        job=view.name,
        scheduler_job=naming.scheduler_job_name(team.name, view.name),
        schedule="0 * * * *",
        time_zone="UTC",
        grace=timedelta(minutes=30),
        lookback=timedelta(days=1),
        since=SCHEDULED.replace(minute=0, second=0, microsecond=0) - timedelta(minutes=1),
        pause_after_failures=view.pause_after_failures,
    )
    watch = Watch(team=team.name, project=team.project, location=team.region, jobs=(job,))
    ledger = MemoryStore(LEASE, RETENTION, clock)
    first = SCHEDULED.replace(minute=0, second=0, microsecond=0)
    for hour in range(view.pause_after_failures):
        clock.current = first + timedelta(hours=hour)
        key = scheduled_key(job.scheduler_job, clock.current, team.project, team.region)
        assert ledger.fail(ledger.claim(key, {"job": job.scheduler_job}), "PermanentError: gone")

    class Paused:
        def run(self, name: str) -> None:
            raise AssertionError(name)

        def pause(self, name: str) -> None:
            pass

        def paused_since(self, name: str) -> None:
            return None

    clock.current = first + timedelta(hours=view.pause_after_failures, minutes=1)
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        claims = MemoryStore(LEASE, RETENTION, clock)
        assert check(watch, ledger, claims, now=clock.current, scheduler=Paused())["paused"] == 1
    (line,) = [line for line in _lines(out.getvalue()) if PAUSED in line]
    return line


@pytest.fixture(scope="module")
def pausing(archive_dir, tmp_path_factory) -> Applied:
    """A team whose job is paused after 3 failed runs, with alerts, its filters evaluated."""
    from tests.stacks.test_pause import PAUSING

    return applied(
        synthesize(replace(PAUSING, alerts=True), archive_dir), tmp_path_factory.mktemp("console-pause")
    )


def test_the_paused_job_alert_matches_the_watchdogs_pause_line_and_no_other(pausing, deliveries):
    team = pausing.synth.team
    where = naming.function_name(team.name, "watchdog")
    line = _paused_line(team, ManualClock(SCHEDULED))
    alert = pausing.log_matches["a job was paused after its runs kept failing"]
    entry = stored(line, where, pausing.project, pausing.region)
    assert matches(alert, entry)
    assert not matches(
        alert,
        stored({**line, "scheduler_job": "another-team-report"}, where, pausing.project, pausing.region),
    )
    assert not matches(
        alert,
        stored(watchdog_line(deliveries, team, team.jobs[0].name), where, pausing.project, pausing.region),
    )
    for delivery, _, other in entries(pausing, deliveries):
        assert not matches(alert, other), delivery.name


def test_a_team_that_pauses_no_job_has_no_paused_job_alert(stack):
    assert all(job.pause_after_failures == 0 for job in stack.synth.team.scheduled_views)
    assert "a job was paused after its runs kept failing" not in stack.log_matches


# A chart per job that may be paused (docs/monitoring.md, "Dashboard"): its pauses, from the
# watchdog's real pause line through the paused jobs metric; its failed runs, from the library's
# real answer line through the answers metric; its retried-out runs, from the watchdog's real
# missed-run line through the missed runs metric. Each value is checked in the shape its line
# carries it: the pause and missed-run lines' `job` is the team file's name, an answer line's `job`
# the X-CloudScheduler-JobName header, the Scheduler job's short id.


def metric_point(stack: Applied, metric: str, entry: Mapping[str, Any]) -> dict[str, Any] | None:
    """The point the log-based metric `runonce-TEAM-<metric>` records for a log entry, or None
    when its filter does not count the entry."""
    name = f"runonce-{stack.synth.team.name}-{metric}"
    found = stack.metrics[name]
    if not matches(found["filter"], entry):
        return None
    labels = extracted(entry, found["label_extractors"])
    return {"metric": {"type": f"{LOG_METRIC_PREFIX}{name}", "labels": labels}, "resource": entry["resource"]}


def shown(chart: str, point: dict[str, Any] | None) -> bool:
    """Whether a chart's data set shows a point (a point no metric recorded shows nowhere)."""
    return point is not None and matches(chart, point, "monitoring")


def test_the_pause_chart_shows_the_jobs_real_pause_failed_and_retried_out_lines(pausing, deliveries):
    team = pausing.synth.team
    job = team.jobs[0].name
    scheduler_job = naming.scheduler_job_name(team.name, job)
    # The id X-CloudScheduler-JobName carries: the Scheduler job's own name.
    assert scheduler_job in {
        config["name"] for config in pausing.synth.resources("google_cloud_scheduler_job").values()
    }
    watchdog = naming.function_name(team.name, "watchdog")
    function = naming.function_name(team.name, job)
    (paused, failed, retried_out) = chart_filters(pausing)[f"{job}: pauses and failed runs"]

    def entry(line: Mapping[str, Any], service: str) -> dict[str, Any]:
        return stored(line, service, pausing.project, pausing.region)

    pause = _paused_line(team, ManualClock(SCHEDULED))
    assert (pause["job"], pause["scheduler_job"]) == (job, scheduler_job)
    assert shown(paused, metric_point(pausing, "paused-jobs", entry(pause, watchdog)))
    other = {**pause, "job": "weekly", "scheduler_job": naming.scheduler_job_name(team.name, "weekly")}
    assert not shown(paused, metric_point(pausing, "paused-jobs", entry(other, watchdog)))

    answered = answer_line(deliveries, "scheduled failed")
    assert answered["outcome"] == "failed"
    assert answered["job"] == scheduler_headers()[JOB_HEADER]  # the line carries the header's value
    as_sent = {**answered, "job": scheduler_job}
    assert shown(failed, metric_point(pausing, "answers", entry(as_sent, function)))
    # Labelled by the team file's name, as the pause line is, the chart would show nothing.
    assert not shown(failed, metric_point(pausing, "answers", entry({**answered, "job": job}, function)))
    completed = {**answer_line(deliveries, "scheduled completed"), "job": scheduler_job}
    assert not shown(failed, metric_point(pausing, "answers", entry(completed, function)))

    missed = watchdog_line(deliveries, team, job, **{MISSED_RUN_FIELD: MissedRun.RETRIED_OUT.value})
    assert shown(retried_out, metric_point(pausing, "missed-runs", entry(missed, watchdog)))
    never = watchdog_line(deliveries, team, job)
    assert never[MISSED_RUN_FIELD] == MissedRun.NEVER_DELIVERED.value
    assert not shown(retried_out, metric_point(pausing, "missed-runs", entry(never, watchdog)))
    # The pause line is no missed run, and no missed-run line a pause.
    assert metric_point(pausing, "missed-runs", entry(pause, watchdog)) is None
    assert metric_point(pausing, "paused-jobs", entry(missed, watchdog)) is None


def test_a_team_that_pauses_no_job_has_no_pause_chart_and_no_paused_jobs_metric(stack):
    assert all(job.pause_after_failures == 0 for job in stack.synth.team.scheduled_views)
    assert not [title for title in chart_filters(stack) if title.endswith(": pauses and failed runs")]
    assert f"runonce-{stack.synth.team.name}-paused-jobs" not in stack.metrics
