"""The local Cloud Run services: an app of localscheduler/hosts/apps (Flask, Django, FastAPI, and
the example service of examples/service) on its server (`gunicorn`, `uvicorn`), as a pool of
instances serving one of its routes. The services demo, the chaos simulation on a server host and
the team files' service jobs (`TeamServices`) all start them from here.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path

from localscheduler.hosts.apps.job import SERVICES_OUTBOX_VARIABLE
from localscheduler.hosts.gunicorn import Gunicorn
from localscheduler.hosts.pool import Host, InstancePool
from localscheduler.hosts.uvicorn import Uvicorn
from stacks.team import Service as TeamService
from stacks.team import ServiceJob, Team

APPS = Path(__file__).resolve().parent / "apps"
JOB_ROUTE = "jobs/close"
"""Every app's `@deduplicated` route."""
EVENT_ROUTE = "events/orders"
"""Every app's `@deduplicated_event` route (Pub/Sub push)."""


@dataclass(frozen=True)
class Service:
    """One framework's app on one server: the file and object the host serves, and the route."""

    name: str
    host: Host
    source: Path
    target: str
    route: str = JOB_ROUTE

    @property
    def outbox(self) -> str:
        """The Firestore collection of its job's effects."""
        return f"services_outbox_{self.name.replace('-', '_')}"

    def events(self) -> Service:
        """The same app and server, serving its `@deduplicated_event` route."""
        return replace(self, route=EVENT_ROUTE)

    def pool(self, name: str, size: int, env: dict[str, str], log_dir: Path) -> InstancePool:
        """`size` instances of the app serving its route, its job's effects in `outbox`."""
        env = {**env, SERVICES_OUTBOX_VARIABLE: self.outbox}
        return InstancePool(name, self.source, self.target, size, env, log_dir, self.host, route=self.route)


def services(python: Path | None = None) -> tuple[Service, ...]:
    """The three services, run by `python` (a venv with runonce installed from its wheel, see
    `installed_python`) or, by default, by this interpreter with runonce from the source tree."""
    return (
        Service("gunicorn-flask", Gunicorn(python), APPS / "flask_app.py", "app"),
        Service("gunicorn-django", Gunicorn(python), APPS / "django_app.py", "application"),
        Service("uvicorn-fastapi", Uvicorn(python), APPS / "fastapi_app.py", "app"),
    )


def example_service(python: Path | None = None) -> Service:
    """examples/service/main.py on uvicorn, as its Dockerfile serves it, with the demo's fault knobs
    (localscheduler/hosts/apps/example_service.py)."""
    return Service("example-service", Uvicorn(python), APPS / "example_service.py", "app")


@dataclass(frozen=True)
class TeamServices:
    """How the demo serves the Cloud Run services of the team files, for their `ServiceJob`s: a
    service the stack deploys (it has an image) as the example service, the image `make
    service-image` builds; an existing one as the Flask app on gunicorn. Both serve their
    `@deduplicated` job at /jobs/close only, so a job on another path is not served."""

    python: Path | None = None
    """The interpreter of the instances (see `services`)."""

    def serves(self, job: ServiceJob) -> bool:
        """Whether a local app has the job's path."""
        return job.path == f"/{JOB_ROUTE}"

    def local(self, team: Team, service: TeamService) -> Service:
        """The local service standing in for the team's `service`; its outbox is its own."""
        stand_in = example_service(self.python) if service.deployed else services(self.python)[0]
        return replace(stand_in, name=f"{team.name}-{service.name}")


def installed_python(work: Path) -> Path:
    """Build runonce's wheel from functions/ and install it into a fresh venv under `work`
    (localscheduler/hosts/wheel.py: offline, the shared venv's packages visible); that venv's python."""
    from localscheduler.hosts.wheel import build_wheel, install

    return install(build_wheel(work / "wheel"), work / "venv")
