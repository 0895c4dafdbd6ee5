"""One job's function: a gen2 Cloud Run function built from the job's folder plus runonce."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from constructs import Construct

from stacks import defaults, naming
from stacks.archive import Archive, build_archive
from stacks.build_storage import BuildStorage
from stacks.dedup_store import DedupStore
from stacks.identity import job_service_account, member, resource_id
from stacks.provider import (
    ArtifactRegistryRepositoryIamMember,
    Cloudfunctions2Function,
    Cloudfunctions2FunctionBuildConfig,
    Cloudfunctions2FunctionBuildConfigSource,
    Cloudfunctions2FunctionBuildConfigSourceStorageSource,
    Cloudfunctions2FunctionServiceConfig,
    ProjectIamMember,
    ProjectIamMemberCondition,
    StorageBucketIamMember,
)
from stacks.required_apis import RequiredApis
from stacks.team import FUNCTIONS_DIR, REPO_ROOT, Job, Team

ARCHIVE_DIR = REPO_ROOT / "build" / "sources"


@dataclass(frozen=True)
class DeduplicatedFunctionProps:
    """Everything one job's function is built from."""

    team: Team
    """The job's team (project, region, ledger settings)."""
    job: Job
    """The job: source folder, entry point, timeout, memory, instances, env, labels."""
    store: DedupStore
    """The team's ledger; the runtime account may use this database and nothing else."""
    build: BuildStorage
    """The team's source bucket and image repository."""
    apis: RequiredApis
    """The stack's enabled APIs."""
    archive: Archive
    """The job's source archive (`job_archive`), built by the stack once per source folder."""


def runonce_environment(team: Team, job: Job) -> dict[str, str]:
    """The RUNONCE_* variables runonce reads, from the team and job config."""
    return {
        "GOOGLE_CLOUD_PROJECT": team.project,
        "RUNONCE_DATABASE": team.database,
        "RUNONCE_COLLECTION": team.collection,
        "RUNONCE_LEASE_SECONDS": str(job.lease_seconds),
        "RUNONCE_RETENTION_SECONDS": str(job.retention_seconds),
    }


def job_archive(job: Job, out_dir: Path) -> Archive:
    """The job's folder at the archive root with the runonce library beside it."""
    return build_archive(
        {"": job.source_dir, defaults.RUNONCE_PACKAGE: FUNCTIONS_DIR / defaults.RUNONCE_PACKAGE}, out_dir
    )


class DeduplicatedFunction(Construct):
    """A gen2 function with its own runtime and build service accounts, internal ingress only.

    The runtime account holds `roles/datastore.user` conditioned to the team's database. The
    build account may read the team's source bucket, push to the team's repository and write
    build logs. The source is uploaded under its content digest, so only a change redeploys.
    """

    def __init__(self, scope: Construct, id: str, props: DeduplicatedFunctionProps) -> None:
        super().__init__(scope, id)
        team, job = props.team, props.job
        self.runtime_account = job_service_account(
            self, "runtime-account", team, job, "run", "function runtime", props.apis
        )
        """The `google_service_account` the function runs as."""
        runtime_email = self.runtime_account.email  # read once: each read is a jsii round trip
        self.ledger_grant = ProjectIamMember(
            self,
            "runtime-ledger",
            project=team.project,
            role=defaults.ROLE_LEDGER,
            member=member(runtime_email),
            condition=ProjectIamMemberCondition(
                title="runonce-ledger-only",
                description=f"Only the {team.database} Firestore database",
                expression=f'resource.name == "{props.store.resource_name}"',
            ),
        )
        """roles/datastore.user on the ledger database only (IAM condition)."""

        self.build_account = job_service_account(
            self, "build-account", team, job, "build", "function build", props.apis
        )
        """The `google_service_account` Cloud Build runs the function's build as."""
        build_email = self.build_account.email
        build_member = member(build_email)
        self.build_grants = [
            StorageBucketIamMember(
                self,
                "build-source-reader",
                bucket=props.build.bucket_name,
                role=defaults.ROLE_BUILD_SOURCE_READER,
                member=build_member,
            ),
            ArtifactRegistryRepositoryIamMember(
                self,
                "build-image-writer",
                project=team.project,
                location=props.build.repository_location,
                repository=props.build.repository_name,
                role=defaults.ROLE_BUILD_IMAGE_WRITER,
                member=build_member,
            ),
            ProjectIamMember(
                self,
                "build-log-writer",
                project=team.project,
                role=defaults.ROLE_BUILD_LOG_WRITER,
                member=build_member,
            ),
        ]
        """What the build needs: read the sources, push the image, write its log."""

        self.archive = props.archive
        """The deterministic source archive (path and digest)."""
        self.source_object = props.build.upload(self.archive, job.source)
        """The `google_storage_bucket_object` holding the archive (shared by jobs with the same files)."""

        self.function = Cloudfunctions2Function(
            self,
            "function",
            project=team.project,
            location=team.region,
            name=naming.function_name(team.name, job.name),
            description=job.description or None,
            labels={**job.labels, "runonce-job": job.name},
            build_config=Cloudfunctions2FunctionBuildConfig(
                runtime=job.runtime,
                entry_point=job.entry_point,
                service_account=resource_id(team.project, build_email),
                docker_repository=props.build.repository_id,
                source=Cloudfunctions2FunctionBuildConfigSource(
                    storage_source=Cloudfunctions2FunctionBuildConfigSourceStorageSource(
                        bucket=props.build.bucket_name, object=naming.source_object_name(self.archive.digest)
                    )
                ),
            ),
            service_config=Cloudfunctions2FunctionServiceConfig(
                service_account_email=runtime_email,
                ingress_settings=defaults.INGRESS,
                all_traffic_on_latest_revision=True,
                timeout_seconds=job.timeout_seconds,
                available_memory=job.memory,
                min_instance_count=job.min_instances,
                max_instance_count=job.max_instances,
                environment_variables={**runonce_environment(team, job), **job.env},
            ),
            depends_on=[
                *props.apis.of(defaults.API_FUNCTIONS, defaults.API_RUN, defaults.API_CLOUD_BUILD),
                self.source_object,
                *self.build_grants,
                self.ledger_grant,
            ],
        )
        """The `google_cloudfunctions2_function`; `function.url` is what Scheduler calls."""
