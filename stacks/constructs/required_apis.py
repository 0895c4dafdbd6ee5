"""The Google APIs a team stack needs, enabled in the team's project, and a wait after it."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from constructs import Construct

from stacks.config import defaults
from stacks.constructs.provider import ProjectService, Sleep
from stacks.toolchain import ITerraformDependable


@dataclass(frozen=True)
class RequiredApisProps:
    """What to enable, and where."""

    project: str
    """Project id the APIs are enabled in."""
    services: Sequence[str] = defaults.REQUIRED_APIS
    """API service names; default: every API the runonce constructs call."""
    settle: str = defaults.API_SETTLE
    """How long to wait after enabling before anything uses the APIs (a time_sleep duration)."""


class RequiredApis(Construct):
    """One `google_project_service` per API, left enabled on destroy (the project may need it),
    and one `time_sleep` after all of them: enabling is eventually consistent, so a resource
    created the moment its API reports enabled can still be refused on a fresh project."""

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
        self.settled = Sleep(
            self,
            "settled",
            create_duration=props.settle,
            # Waits on create only; a changed list of APIs re-creates it and waits again.
            triggers={"services": ",".join(sorted(self.services))},
            depends_on=list(self.services.values()),
        )
        """The `time_sleep` that ends `settle` after the last API was enabled (again whenever the
        list of APIs changes)."""

    def of(self, *services: str) -> list[ITerraformDependable]:
        """What a resource calling these APIs depends on: their enablement, and the wait after it."""
        return [*(self.services[service] for service in services), self.settled]
