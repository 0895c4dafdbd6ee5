"""The per-job accounts a team had before accounts were shared, kept for one apply.

Step 1 of the migration (`Team.keep_per_job_accounts`, docs/stacks.md "Migration"): every
function is rebuilt as the team's build account and every Scheduler job signs as the team's
invoker, while each job's old build account (with its four grants) and old invoker account stay
exactly where they were in Terraform's state, so none of them is destroyed in the apply that
stops using them. Terraform (1.11, verified on a model of this stack, tests/stacks/test_migration.py)
destroys a resource removed from the configuration *before* it updates the resources that
referenced it, unless its state says create_before_destroy; removing them in the same apply
that repoints the jobs is a dependency cycle that fails the plan. Step 2 removes them: by then
nothing refers to them any more.

Same construct ids, account ids, display names and grants as the stacks created before, so
Terraform sees no change to any of them. They are marked (description) so that the policy rule
for unused accounts (RO-IAM-4) knows they are retiring.
"""

from __future__ import annotations

from constructs import Construct

from stacks import naming
from stacks.constructs.build_grants import grant_build_access
from stacks.constructs.build_storage import BuildStorage
from stacks.constructs.identity import member, service_account
from stacks.constructs.provider import ServiceAccount
from stacks.constructs.required_apis import RequiredApis
from stacks.contract import RETIRING_ACCOUNT


def keep_job_accounts(
    stack: Construct,
    schedule: Construct,
    project: str,
    team: str,
    job: str,
    build: BuildStorage,
    apis: RequiredApis,
    gcf_sources_bucket: str,
) -> list[ServiceAccount]:
    """The job's old build account with its grants (in `stack`, ids `<job>-identity-build-*`) and
    its old invoker account (in the job's `schedule` construct, id `invoker-account`), in
    `project`, named after the `team` and `job` names."""
    prefix = f"{job}-identity"
    build_account = _account(
        stack, f"{prefix}-build-account", project, team, job, "build", "function build", apis
    )
    grant_build_access(
        stack, f"{prefix}-build", member(build_account.email), project, build, apis, gcf_sources_bucket
    )
    invoker_account = _account(
        schedule, "invoker-account", project, team, job, "call", "scheduler invoker", apis
    )
    return [build_account, invoker_account]


def _account(
    scope: Construct, id: str, project: str, team: str, job: str, role: str, purpose: str, apis: RequiredApis
) -> ServiceAccount:
    account = service_account(
        scope,
        id,
        project,
        naming.account_id(team, job, role),
        f"runonce {team}/{job} {purpose}",
        apis,
    )
    account.description = RETIRING_ACCOUNT
    return account
