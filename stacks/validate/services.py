"""Jobs on services the team runs: Cloud Run services (`Service`, `ServiceJob`) and the team's App
Engine application (`AppEngineJob`). Cloud Run's limits for a service, the service a job names,
its path, App Engine's routing and request timeouts; the Scheduler settings of each job are
checked by `schedules` and `windows` on the job's `scheduled` view, as a function job's are.
docs/stacks/services.md cites the limits."""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterator

from stacks import locations, naming
from stacks.config.problem import Problem, ProblemAt
from stacks.config.team import (
    APP_ENGINE_REQUEST_TIMEOUT_SECONDS,
    MAX_SERVICE_TIMEOUT_SECONDS,
    AppEngineJob,
    Service,
    ServiceJob,
    Team,
)
from stacks.validate import function_limits

# Cloud Run: at most 1000 concurrent requests per instance ("Maximum concurrent requests per instance").
MAX_CONCURRENCY = 1000
# Cloud Run's CPU limits for a service ("Configure CPU limits"): below one CPU in millicores, or whole CPUs.
CPU_LIMITS = ("1", "2", "4", "6", "8")
MILLI_CPU = re.compile(r"^[1-9][0-9]{0,2}m$")
# Cloud Run service memory: a number and a binary unit (Mi, Gi), 128Mi to 32Gi ("Configure memory limits").
MEMORY = re.compile(r"^[1-9][0-9]*(Mi|Gi)$")
# An image reference: registry host, path, then a tag or a digest (no whitespace, no scheme).
IMAGE = re.compile(r"^[a-z0-9.-]+(:[0-9]+)?/[a-z0-9._/-]+(:[A-Za-z0-9_.-]{1,128}|@sha256:[0-9a-f]{64})$")
# A path (and query) of a URL: starts with "/", no whitespace (Scheduler's relative_uri rule,
# at most 2083 characters).
PATH = re.compile(r"^/\S*$")
MAX_RELATIVE_URI = 2083
# Scheduler's attempt deadline for App Engine targets: 15 s to 24 h (Job.attemptDeadline).
MAX_APP_ENGINE_ATTEMPT_DEADLINE = 24 * 3600
# App Engine service and version ids: lowercase letters, digits and hyphens, at most 63.
APP_ENGINE_ID = re.compile(r"^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$")
EMAIL = re.compile(
    r"^[a-z][a-z0-9-]{4,28}[a-z0-9]@[a-z0-9.-]+\.iam\.gserviceaccount\.com$|^[a-z0-9-]+@appspot\.gserviceaccount\.com$"
)
DEPLOYED_ONLY = ("concurrency", "min_instances", "max_instances", "memory", "cpu", "env", "labels")
"""The `Service` fields that only a deployed service uses."""


def service(team: Team, svc: Service, problem: ProblemAt) -> Iterator[Problem]:
    """One service of `Team.services`: its name, and Cloud Run's limits for what the stack deploys."""
    if not naming.DNS_LABEL.match(svc.name) or len(svc.name) > naming.MAX_JOB_NAME:
        yield problem(
            "name",
            f"{svc.name!r} is not a valid Cloud Run service name here",
            "use lowercase letters, digits and hyphens, start with a letter, "
            f"at most {naming.MAX_JOB_NAME} characters (it names the runtime account)",
        )
    if not 1 <= svc.timeout_seconds <= MAX_SERVICE_TIMEOUT_SECONDS:
        yield problem(
            "timeout_seconds",
            f"{svc.timeout_seconds} s is outside Cloud Run's request timeout range, "
            f"1-{MAX_SERVICE_TIMEOUT_SECONDS} s",
            f"choose 1-{MAX_SERVICE_TIMEOUT_SECONDS} (the service's request timeout)",
        )
    if not svc.deployed:
        defaults = Service(name=svc.name)
        for field in DEPLOYED_ONLY:
            if getattr(svc, field) != getattr(defaults, field):
                yield problem(
                    field,
                    "is set on a service the stack does not deploy (it has no image), so it changes nothing",
                    f"remove {field}, or give image=... to let the stack deploy the service",
                )
        return
    if not IMAGE.match(svc.image):
        yield problem(
            "image",
            f"{svc.image!r} is not a container image reference with a tag or digest",
            'write "REGION-docker.pkg.dev/PROJECT/REPOSITORY/IMAGE:TAG" (or @sha256:DIGEST)',
        )
    if not 1 <= svc.concurrency <= MAX_CONCURRENCY:
        yield problem(
            "concurrency",
            f"{svc.concurrency} is outside Cloud Run's 1-{MAX_CONCURRENCY} requests per instance",
            f"choose 1-{MAX_CONCURRENCY}",
        )
    if svc.min_instances < 0 or svc.max_instances < 1 or svc.min_instances > svc.max_instances:
        yield problem(
            "min_instances",
            f"min_instances={svc.min_instances}, max_instances={svc.max_instances} is not a valid range",
            "use 0 <= min_instances <= max_instances and max_instances >= 1",
        )
    if not MEMORY.match(svc.memory):
        yield problem(
            "memory", f"{svc.memory!r} is not a Cloud Run memory limit", 'write e.g. "512Mi" or "2Gi"'
        )
    if svc.cpu not in CPU_LIMITS and not MILLI_CPU.match(svc.cpu):
        yield problem(
            "cpu",
            f"{svc.cpu!r} is not a Cloud Run CPU limit",
            f'use one of {", ".join(CPU_LIMITS)}, or millicores below one CPU ("500m")',
        )
    for name in svc.env:
        reserved = name in function_limits.RESERVED_ENV or name.startswith(
            function_limits.RESERVED_ENV_PREFIXES
        )
        if not function_limits.ENV_NAME.match(name) or name.startswith("RUNONCE_") or reserved:
            yield problem(
                "env",
                f"{name!r} is not a valid variable name, is Cloud Run's (its container runtime "
                "contract sets it), or is one the stack sets",
                "use letters, digits and underscores, not a name Cloud Run reserves; RUNONCE_* come "
                "from the team and service fields",
            )
    if not any(job.service == svc.name for job in team.service_jobs):
        yield problem(
            "name",
            "no service job calls this service",
            f'add ServiceJob(name=..., schedule=..., service="{svc.name}", path=...) or remove the service',
        )


def service_job(team: Team, job: ServiceJob, problem: ProblemAt) -> Iterator[Problem]:
    """The service a job names exists in `Team.services`, and its path is a path."""
    known = [svc.name for svc in team.services]
    if job.service not in known:
        close = difflib.get_close_matches(job.service, known, n=1)
        yield problem(
            "service",
            f"{job.service!r} is not one of the team's services",
            f"write service={close[0]!r}"
            if close
            else f'add Service(name="{job.service}", ...) to the team\'s services (with image=... '
            "for the stack to deploy it, without for an existing service)",
        )
    if not PATH.match(job.path) or len(job.path) > MAX_RELATIVE_URI:
        yield problem(
            "path",
            f"{job.path!r} is not a path of the service",
            'write a path starting with "/" without spaces, e.g. "/jobs/close"',
        )


def app_engine_job(job: AppEngineJob, problem: ProblemAt) -> Iterator[Problem]:
    """App Engine routing, the request timeout of the service's scaling, and the runtime account."""
    if not PATH.match(job.relative_uri) or len(job.relative_uri) > MAX_RELATIVE_URI:
        yield problem(
            "relative_uri",
            f"{job.relative_uri!r} is not a relative URI",
            f'write a path starting with "/" without spaces, at most {MAX_RELATIVE_URI} characters',
        )
    if not APP_ENGINE_ID.match(job.service):
        yield problem(
            "service",
            f"{job.service!r} is not an App Engine service id",
            'use lowercase letters, digits and hyphens (the service of app.yaml; "default" if none)',
        )
    if job.version and not APP_ENGINE_ID.match(job.version):
        yield problem(
            "version",
            f"{job.version!r} is not an App Engine version id",
            'use lowercase letters, digits and hyphens, or "" for the version serving traffic',
        )
    limit = APP_ENGINE_REQUEST_TIMEOUT_SECONDS.get(job.scaling)
    if limit is None:
        yield problem(
            "scaling",
            f"{job.scaling!r} is not an App Engine scaling type",
            f"use one of {', '.join(APP_ENGINE_REQUEST_TIMEOUT_SECONDS)} (the scaling of the "
            "service's app.yaml)",
        )
    elif not 1 <= job.timeout_seconds <= limit:
        yield problem(
            "timeout_seconds",
            f"{job.timeout_seconds} s is outside 1-{limit} s: App Engine ends a request of a service "
            f"with {job.scaling} scaling after {limit} s",
            f"choose 1-{limit}, or use basic or manual scaling for longer work"
            if job.scaling == "automatic"
            else f"choose 1-{limit}",
        )
    if job.service_account and not EMAIL.match(job.service_account):
        yield problem(
            "service_account",
            f"{job.service_account!r} is not a service account email",
            'write the service_account of app.yaml ("NAME@PROJECT.iam.gserviceaccount.com"), or "" '
            "for App Engine's default account",
        )


DESCRIBE = "gcloud app describe --project={project} --format='value(locationId)'"
"""The command that prints the App Engine application's location as `Team.app_engine_location` takes it."""


def app_engine_location(team: Team, problem: ProblemAt) -> Iterator[Problem]:
    """`Team.app_engine_location`: given with App Engine jobs (Scheduler creates them only in the
    application's region), App Engine's own name of a region Scheduler offers, and not given
    without them."""
    where, describe = team.app_engine_location, DESCRIBE.format(project=team.project)
    if not team.app_engine_jobs:
        if where:
            yield problem(
                "app_engine_location",
                "is set on a team without App Engine jobs, so it changes nothing",
                "remove app_engine_location, or add AppEngineJob(...) to app_engine_jobs",
            )
        return
    if not where:
        yield problem(
            "app_engine_location",
            "is missing: the team has App Engine jobs, which Cloud Scheduler creates only in the "
            "App Engine application's region (its API refuses any other: 400 Location must equal ...)",
            f'set app_engine_location to what `{describe}` prints, e.g. "europe-west"',
        )
        return
    app_engine_name = next(
        (name for name, region in locations.APP_ENGINE_NAMES.items() if region == where), None
    )
    if app_engine_name is not None:
        yield problem(
            "app_engine_location",
            f"{where!r} is Cloud Scheduler's name of the region App Engine calls {app_engine_name!r}: "
            "the field takes App Engine's name, as `gcloud app describe` prints it",
            f"write app_engine_location={app_engine_name!r} (the stack puts the App Engine jobs in {where})",
        )
    elif team.app_engine_region not in locations.SCHEDULER_REGIONS:
        known = [
            *locations.APP_ENGINE_NAMES,
            *sorted(locations.SCHEDULER_REGIONS - set(locations.APP_ENGINE_NAMES.values())),
        ]
        close = difflib.get_close_matches(where, known, n=3, cutoff=0.6)
        yield problem(
            "app_engine_location",
            f"{where!r} is not an App Engine location that offers Cloud Scheduler (pinned lists in "
            "stacks/locations.py)",
            f"write what `{describe}` prints"
            + (f" (close: {', '.join(repr(name) for name in close)})" if close else "")
            + f"; if Google lists it now ({locations.LOCATIONS_PAGES}), add it to stacks/locations.py",
        )
