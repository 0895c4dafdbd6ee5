"""What a proxy's runtime account may do besides using the ledger: start its one target.

One proxy function per target (jobs naming the same target share it, `stacks.config.sharing`), so each
proxy's account holds the role of one target only, on the narrowest resource the API lets us
grant it on (docs/targets.md, "The stacks"):

- Workflow: `roles/workflows.invoker` on the workflow's project. Google lists "Project" as the
  lowest-level resource for the Workflows roles, and the provider has no workflow-level IAM
  resource.
- CloudRunJob: `roles/run.jobsExecutorWithOverrides` on the one job
  (`google_cloud_run_v2_job_iam_member`). The proxy always sends overrides (the run key in env),
  which need run.jobs.runWithOverrides besides run.jobs.run; this role executes and cancels jobs
  with overrides and, unlike Cloud Run Developer, cannot change the job.
- BuildTrigger: `roles/cloudbuild.builds.editor` on the trigger's project: triggers have no IAM
  policy of their own (nor a provider IAM resource), and Cloud Build ignores resource attributes in
  conditions. Checkov's CKV_GCP_49 is accepted on this grant only (`policy.checkov.ACCEPTED`).
  A trigger that runs as its own service account (`BuildTrigger.service_account`) also needs
  actAs on that account: `roles/iam.serviceAccountUser` on that one account.
- GoogleApi: the target's `role` on the team's project: an arbitrary call names no resource the
  stack could grant it on.

Project-level grants are unconditioned: neither Workflows nor Cloud Build is known to us to
evaluate `resource.name` in IAM conditions, and a condition a service ignores would make the grant
never match. The policy rule RO-IAM-8 checks that a proxy's account holds exactly this.
"""

from __future__ import annotations

import re

from constructs import Construct

from stacks.config import defaults
from stacks.config.targets import (
    JOB_NAME,
    SERVICE_ACCOUNT_EMAIL,
    TRIGGER_NAME,
    WORKFLOW_NAME,
    BuildTrigger,
    CloudRunJob,
    GoogleApi,
    Target,
    Workflow,
)
from stacks.constructs import provider
from stacks.constructs.identity import member, resource_id
from stacks.constructs.provider import ProjectIamMember, ServiceAccountIamMember
from stacks.constructs.required_apis import RequiredApis
from stacks.toolchain import ITerraformDependable

ROLE_WORKFLOW = "roles/workflows.invoker"
ROLE_CLOUD_RUN_JOB = "roles/run.jobsExecutorWithOverrides"
ROLE_BUILD_TRIGGER = "roles/cloudbuild.builds.editor"
ROLE_ACT_AS = "roles/iam.serviceAccountUser"
API_WORKFLOW_EXECUTIONS = "workflowexecutions.googleapis.com"
SERVICE_HOST = re.compile(r"^https://([a-z0-9]+\.googleapis\.com)/")


def target_apis(target: Target) -> tuple[str, ...]:
    """The APIs the proxy calls for this target, which the stack enables in the team's project."""
    if isinstance(target, Workflow):
        return (API_WORKFLOW_EXECUTIONS,)
    if isinstance(target, CloudRunJob):
        return (defaults.API_RUN,)
    if isinstance(target, BuildTrigger):
        return (defaults.API_CLOUD_BUILD,)
    service = SERVICE_HOST.match(target.url)  # a regional host names no service to enable
    return (service.group(1),) if service else ()


def _parts(pattern: re.Pattern[str], name: str) -> dict[str, str]:
    found = pattern.match(name)
    assert found is not None, name  # validated before the stack is built
    return found.groupdict()


def grant_target(
    scope: Construct, id: str, project: str, target: Target, runtime_email: str, apis: RequiredApis
) -> list[ITerraformDependable]:
    """The grants that let the proxy's account start `target` (resource ids start with `id`): the
    target's role, and for a build trigger that runs as its own account, actAs on that account.
    `project` is the team's, where a generic API call's role is granted."""
    grants = [_grant_role(scope, id, project, target, runtime_email, apis)]
    if isinstance(target, BuildTrigger) and target.service_account:
        # "user does not have impersonation permission on the trigger service account
        # specified" otherwise (docs/targets.md): actAs on that one account, not the project.
        project = _parts(SERVICE_ACCOUNT_EMAIL, target.service_account)["project"]
        grants.append(
            ServiceAccountIamMember(
                scope,
                f"{id}-trigger-account-user",
                service_account_id=resource_id(project, target.service_account),
                role=ROLE_ACT_AS,
                member=member(runtime_email),
                depends_on=apis.of(defaults.API_IAM),
            )
        )
    return grants


def _grant_role(
    scope: Construct, id: str, team_project: str, target: Target, runtime_email: str, apis: RequiredApis
) -> ITerraformDependable:
    """The target's role for the proxy's account on the narrowest resource."""
    principal = member(runtime_email)
    if isinstance(target, CloudRunJob):
        job = _parts(JOB_NAME, target.job)
        return provider.CloudRunV2JobIamMember(
            scope,
            f"{id}-target-runner",
            project=job["project"],
            location=job["location"],
            name=job["name"],
            role=ROLE_CLOUD_RUN_JOB,
            member=principal,
            depends_on=apis.of(defaults.API_RUN),
        )
    if isinstance(target, Workflow):
        project, role = _parts(WORKFLOW_NAME, target.workflow)["project"], ROLE_WORKFLOW
    elif isinstance(target, BuildTrigger):
        project, role = _parts(TRIGGER_NAME, target.trigger)["project"], ROLE_BUILD_TRIGGER
    else:
        assert isinstance(target, GoogleApi) and target.role is not None  # validation requires a role
        project, role = team_project, target.role
    return ProjectIamMember(scope, f"{id}-target-starter", project=project, role=role, member=principal)
