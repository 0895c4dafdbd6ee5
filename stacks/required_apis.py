"""The Google APIs a team stack needs, enabled in the team's project."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from constructs import Construct

from stacks import defaults
from stacks.provider import ProjectService


@dataclass(frozen=True)
class RequiredApisProps:
    """What to enable, and where."""

    project: str
    """Project id the APIs are enabled in."""
    services: Sequence[str] = defaults.REQUIRED_APIS
    """API service names; default: every API the runonce constructs call."""


class RequiredApis(Construct):
    """One `google_project_service` per API, left enabled on destroy (the project may need it)."""

    def __init__(self, scope: Construct, id: str, props: RequiredApisProps) -> None:
        super().__init__(scope, id)
        self.services: dict[str, ProjectService] = {
            service: ProjectService(
                self,
                service.split(".")[0],
                project=props.project,
                service=service,
                disable_on_destroy=False,
            )
            for service in props.services
        }
        """The enabled services by API name; resources that call an API depend on its entry."""

    def of(self, *services: str) -> list[ProjectService]:
        """The resources enabling these APIs, for a `depends_on`."""
        return [self.services[service] for service in services]
