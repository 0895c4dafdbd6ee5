"""The sandbox stack: the sandbox team's `TeamStack`, plus what its jobs point at and the outputs
the tests read.

Besides the team's own resources it holds the bucket the `uploads` job listens to, the Cloud Run
job `run-job` starts and the workflow `workflow` starts, so one apply and one destroy cover
everything. Every resource of the team that names one of them (the Eventarc trigger's bucket
filter, the proxy's grant on the job, a proxy's target) depends on it: Eventarc refuses a trigger
on a bucket that does not exist, and a grant on a job that does not exist fails.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from cdktf import App, TerraformOutput, TerraformResource
from constructs import Construct

from stacks import naming
from stacks.config import defaults
from stacks.constructs import provider
from stacks.constructs.deduplicated_function import ARCHIVE_DIR
from stacks.constructs.identity import service_account
from stacks.constructs.provider import ProjectService, Sleep, StorageBucket
from stacks.constructs.run_service import service_environment
from stacks.team import ServiceJob, Team
from stacks.team_stack import TeamStack
from tests.sandbox.teams import EXISTING_SERVICE, TARGET_JOB_IMAGE, SandboxPlace

# After stacks.constructs.provider: it registers the provider package so that one submodule loads alone.
from cdktf_cdktf_provider_google.cloud_run_v2_job import (  # isort: skip
    CloudRunV2Job,
    CloudRunV2JobTemplate,
    CloudRunV2JobTemplateTemplate,
    CloudRunV2JobTemplateTemplateContainers,
)
from cdktf_cdktf_provider_google.workflows_workflow import WorkflowsWorkflow  # isort: skip

WORKFLOWS_API = "workflows.googleapis.com"
# It declares the argument the proxy passes and returns a constant: no expression, so nothing for
# Terraform to interpolate (Workflows' Terraform sample escapes every "${" as "$${").
WORKFLOW_SOURCE = """main:
  params: [args]
  steps:
    - done:
        return: "started by runonce"
"""
URI_OUTPUT = "{}-uri"
"""Output name of a function's run.app URI, by function name."""
SERVICE_OUTPUT = "{}-service"
"""Output name of a function's Cloud Run service, by function name."""


class SandboxStack(TeamStack):
    """The team's stack with the sandbox's bucket and Cloud Run job, and each function's URI and
    service name as outputs."""

    def __init__(
        self, scope: Construct, team: Team, place: SandboxPlace, archive_dir: Path = ARCHIVE_DIR
    ) -> None:
        super().__init__(scope, team, archive_dir)
        self.upload_bucket = StorageBucket(
            self,
            "sandbox-upload-bucket",
            project=team.project,
            name=place.upload_bucket,
            location=team.region,
            force_destroy=True,
            uniform_bucket_level_access=True,
            public_access_prevention="enforced",
            depends_on=self.apis.of(defaults.API_STORAGE),
        )
        """The bucket whose uploads the `uploads` job receives."""
        self.target_job = CloudRunV2Job(
            self,
            "sandbox-target-job",
            project=team.project,
            location=team.region,
            name=place.target_job_id,
            deletion_protection=False,
            template=CloudRunV2JobTemplate(
                template=CloudRunV2JobTemplateTemplate(
                    containers=[CloudRunV2JobTemplateTemplateContainers(image=TARGET_JOB_IMAGE)],
                    max_retries=0,
                )
            ),
            depends_on=self.apis.of(defaults.API_RUN),
        )
        """The Cloud Run job the `run-job` job starts."""
        # The stack enables only the executions API for a Workflows target: creating a workflow
        # needs the Workflows API, and an API just enabled may still refuse calls (google
        # provider issue 3151).
        workflows_api = ProjectService(
            self,
            "sandbox-workflows-api",
            project=team.project,
            service=WORKFLOWS_API,
            disable_on_destroy=False,
        )
        workflows_settled = Sleep(
            self,
            "sandbox-workflows-api-settled",
            create_duration=defaults.API_SETTLE,
            depends_on=[workflows_api],
        )
        self.target_workflow = WorkflowsWorkflow(
            self,
            "sandbox-target-workflow",
            project=team.project,
            region=team.region,
            name=place.workflow_id,
            deletion_protection=False,
            source_contents=WORKFLOW_SOURCE,
            depends_on=[workflows_api, workflows_settled],
        )
        """The workflow the `workflow` job starts."""
        self.existing_service = self._existing_service(team) if team.service(EXISTING_SERVICE) else None
        """The Cloud Run service the `svc-existing-close` job calls, which the team only reads."""
        depend_on_mentions(self, self.upload_bucket, place.upload_bucket)
        depend_on_mentions(self, self.target_job, place.target_job_id)
        depend_on_mentions(self, self.target_workflow, place.workflow_id)
        functions = dict(self.functions)
        if self.watchdog is not None and self.watchdog.function is not None:
            functions[naming.WATCHDOG] = self.watchdog.function
        for name, function in functions.items():
            TerraformOutput(self, URI_OUTPUT.format(name), value=function.function.service_config.uri)
            TerraformOutput(self, SERVICE_OUTPUT.format(name), value=function.function.service_config.service)

    def _existing_service(self, team: Team) -> provider.CloudRunV2Service:
        """The "existing" service, as a team would have deployed it before: its own account,
        internal ingress, the image of the deployed one and the RUNONCE_* variables set by hand
        (docs/stacks/services.md). The team's data source reads it once it exists (in a real team
        it exists before the plan; here the same apply creates it)."""
        (deployed,) = [svc for svc in team.services if svc.deployed]
        account = service_account(
            self,
            "sandbox-existing-account",
            team.project,
            "sandbox-existing-run",
            "sandbox existing",
            self.apis,
        )
        existing_config = team.service(EXISTING_SERVICE)
        assert existing_config is not None
        environment = service_environment(team, existing_config, ServiceJob.retention_seconds)
        service = provider.CloudRunV2Service(
            self,
            "sandbox-existing-service",
            project=team.project,
            location=team.region,
            name=EXISTING_SERVICE,
            ingress="INGRESS_TRAFFIC_INTERNAL_ONLY",
            deletion_protection=False,
            template=provider.CloudRunV2ServiceTemplate(
                service_account=account.email,
                timeout=f"{existing_config.timeout_seconds}s",
                containers=[
                    provider.CloudRunV2ServiceTemplateContainers(
                        image=deployed.image,
                        env=[
                            provider.CloudRunV2ServiceTemplateContainersEnv(name=name, value=value)
                            for name, value in environment.items()
                        ],
                    )
                ],
            ),
            depends_on=self.apis.of(defaults.API_RUN),
        )
        existing = self.services[EXISTING_SERVICE].existing
        assert existing is not None
        existing.depends_on = [f"{service.terraform_resource_type}.{service.friendly_unique_id}"]
        return service


def depend_on_mentions(stack: TeamStack, target: TerraformResource, name: str) -> None:
    """Make every resource of `stack` whose configuration names `name` (as a whole value or a
    path's segment) depend on `target`."""
    mention = re.compile(rf"(?<![A-Za-z0-9_-]){re.escape(name)}(?![A-Za-z0-9_-])")
    # The resource's address, as cdktf writes depends_on entries (no interpolation braces).
    address = f"{target.terraform_resource_type}.{target.friendly_unique_id}"
    for construct in stack.node.find_all():
        if not isinstance(construct, TerraformResource) or construct is target:
            continue
        if mention.search(json.dumps(construct.to_terraform(), default=str)):
            construct.depends_on = [*(construct.depends_on or []), address]


def synthesize(
    team: Team, place: SandboxPlace, outdir: Path, archive_dir: Path = ARCHIVE_DIR
) -> SandboxStack:
    """Synthesize the sandbox stack into `outdir` (cdktf's layout: `outdir/stacks/<team>`)."""
    app = App(outdir=str(outdir))
    stack = SandboxStack(app, team, place, archive_dir)
    app.synth()
    return stack
