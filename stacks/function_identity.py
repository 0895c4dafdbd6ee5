"""The accounts one job's function builds and runs as, and what each may do.

Built for every job before any function (see `TeamStack`), so that one wait after all the
grants (`defaults.IAM_SETTLE`) precedes every function's creation. It is a plain class whose
resources live in the stack, ids prefixed with the job's name, not a construct of its own: a
construct is one more jsii round trip per job, and synth time grows with the job count.
"""

from __future__ import annotations

from dataclasses import dataclass

from cdktf import ITerraformDependable
from constructs import Construct

from stacks import defaults, naming
from stacks.build_storage import BuildStorage
from stacks.dedup_store import DedupStore
from stacks.identity import job_service_account, member
from stacks.provider import (
    ArtifactRegistryRepositoryIamMember,
    ProjectIamMember,
    ProjectIamMemberCondition,
    StorageBucketIamMember,
)
from stacks.required_apis import RequiredApis
from stacks.team import Job, Team


@dataclass(frozen=True)
class FunctionIdentityProps:
    """The job whose function these accounts serve, and what they may reach."""

    team: Team
    """The job's team (project)."""
    job: Job
    """The job (names the accounts)."""
    store: DedupStore
    """The team's ledger; the runtime account may use this database and nothing else."""
    build: BuildStorage
    """The team's source bucket and image repository."""
    apis: RequiredApis
    """The stack's enabled APIs."""
    gcf_sources_bucket: str
    """Name of Google's gcf-v2-sources bucket of the team's region (`naming.gcf_sources_bucket`)."""


class FunctionIdentity:
    """A runtime account limited to the team's ledger database, and a build account that may
    read the job's source (in the team's bucket and in Google's gcf-v2-sources bucket), push to
    the team's repository and write build logs. Created in `scope` with ids starting `id`."""

    def __init__(self, scope: Construct, id: str, props: FunctionIdentityProps) -> None:
        team, job = props.team, props.job
        # Each API a grant calls; project-level grants use Cloud Resource Manager, which the
        # deployer must have on already (it cannot be enabled through itself).
        storage_api = props.apis.of(defaults.API_STORAGE)
        registry_api = props.apis.of(defaults.API_ARTIFACT_REGISTRY)

        self.runtime_account = job_service_account(
            scope, f"{id}-runtime-account", team, job, "run", "function runtime", props.apis
        )
        """The `google_service_account` the function runs as."""
        self.runtime_email: str = self.runtime_account.email  # read once: each read is a jsii round trip
        """The runtime account's email (a Terraform reference)."""
        self.ledger_grant = ProjectIamMember(
            scope,
            f"{id}-runtime-ledger",
            project=team.project,
            role=defaults.ROLE_LEDGER,
            member=member(self.runtime_email),
            condition=ProjectIamMemberCondition(
                title="runonce-ledger-only",
                description=f"Only the {team.database} Firestore database",
                expression=f'resource.name == "{props.store.resource_name}"',
            ),
        )
        """roles/datastore.user on the ledger database only (IAM condition)."""

        self.build_account = job_service_account(
            scope, f"{id}-build-account", team, job, "build", "function build", props.apis
        )
        """The `google_service_account` Cloud Build runs the function's build as."""
        self.build_email: str = self.build_account.email
        """The build account's email (a Terraform reference)."""
        build_member = member(self.build_email)
        self.build_grants = [
            StorageBucketIamMember(
                scope,
                f"{id}-build-source-reader",
                bucket=props.build.bucket_name,
                role=defaults.ROLE_BUILD_SOURCE_READER,
                member=build_member,
                depends_on=storage_api,
            ),
            ProjectIamMember(
                scope,
                f"{id}-build-gcf-source-reader",
                project=team.project,
                role=defaults.ROLE_BUILD_GCF_SOURCE_READER,
                member=build_member,
                condition=ProjectIamMemberCondition(
                    title="runonce-gcf-sources-only",
                    description="Only the gcf-v2-sources bucket the build fetches the source from",
                    expression=naming.one_bucket_condition(props.gcf_sources_bucket),
                ),
            ),
            ArtifactRegistryRepositoryIamMember(
                scope,
                f"{id}-build-image-writer",
                project=team.project,
                location=props.build.repository_location,
                repository=props.build.repository_name,
                role=defaults.ROLE_BUILD_IMAGE_WRITER,
                member=build_member,
                depends_on=registry_api,
            ),
            ProjectIamMember(
                scope,
                f"{id}-build-log-writer",
                project=team.project,
                role=defaults.ROLE_BUILD_LOG_WRITER,
                member=build_member,
            ),
        ]
        """What the build needs: read the sources (both buckets), push the image, write its log."""

    @property
    def grants(self) -> list[ITerraformDependable]:
        """Every grant of both accounts: the function waits until they have settled."""
        return [self.ledger_grant, *self.build_grants]
