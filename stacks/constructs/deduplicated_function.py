"""One deployed function: a gen2 Cloud Run function built from a source folder plus runonce,
serving one job or several with the same settings (`stacks.config.sharing`)."""

from __future__ import annotations

import tomllib
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from constructs import Construct

from runonce import contract
from stacks import naming
from stacks.config import defaults
from stacks.config.sharing import SharedFunction
from stacks.config.store import Valkey
from stacks.config.targets import TARGET_VARIABLE
from stacks.config.team import FUNCTIONS_DIR, REPO_ROOT, Job, Team
from stacks.constructs.archive import Archive, build_archive, with_requirements
from stacks.constructs.build_storage import BuildStorage
from stacks.constructs.function_identity import FunctionIdentity
from stacks.constructs.identity import CREATE_BEFORE_DESTROY, resource_id
from stacks.constructs.provider import (
    Cloudfunctions2Function,
    Cloudfunctions2FunctionBuildConfig,
    Cloudfunctions2FunctionBuildConfigSource,
    Cloudfunctions2FunctionBuildConfigSourceStorageSource,
    Cloudfunctions2FunctionEventTrigger,
    Cloudfunctions2FunctionServiceConfig,
    Sleep,
)
from stacks.constructs.required_apis import RequiredApis

ARCHIVE_DIR = REPO_ROOT / "build" / "sources"


@dataclass(frozen=True)
class FunctionSpec:
    """The values of one function resource, as plain data (`FunctionSpec.of` reads them from a
    team's shared function)."""

    project: str
    """Project id of the function."""
    region: str
    """Region of the function."""
    name: str
    """The function's name (`naming.function_name`)."""
    label: str
    """The `runonce-function` label's value: the job the function is named after."""
    source: str
    """The folder under functions/ whose archive it runs (names the uploaded object's group)."""
    runtime: str
    """Cloud Run functions runtime the source is built with."""
    entry_point: str
    """Name of the decorated function in the folder's main.py."""
    timeout_seconds: int
    """Function timeout."""
    memory: str
    """Function memory, Cloud Run notation."""
    min_instances: int
    """Instances kept warm."""
    max_instances: int
    """Upper bound on instances."""
    environment: dict[str, str]
    """Every environment variable: runonce's own (`runonce_environment`) and the job's env."""
    labels: dict[str, str] = field(default_factory=dict)
    """Labels on the function besides `runonce-function` (the provider adds the team's)."""
    description: str = ""
    """Shown on the function; "" sets none."""

    @classmethod
    def of(cls, team: Team, function: SharedFunction) -> FunctionSpec:
        """The spec of one of the team's functions, from the settings its jobs share (the first
        job's, which are every job's)."""
        job = function.first
        return cls(
            project=team.project,
            region=team.region,
            name=naming.function_name(team.name, function.name),
            label=function.name,
            source=job.code_source,
            runtime=job.runtime,
            entry_point=job.entry_point,
            timeout_seconds=job.timeout_seconds,
            memory=job.memory,
            min_instances=job.min_instances,
            max_instances=job.max_instances,
            environment={**runonce_environment(team, function), **job.env},
            labels=job.labels,
            description=job.description,
        )


@dataclass(frozen=True)
class DeduplicatedFunctionProps:
    """Everything one function is built from: its spec, and the stack's parts it uses."""

    spec: FunctionSpec
    """The function resource's own values."""
    build: BuildStorage
    """The team's source bucket and image repository."""
    apis: RequiredApis
    """The stack's enabled APIs."""
    identity: FunctionIdentity
    """The account the function runs as, with its ledger grant."""
    build_email: str
    """The team's build account (its email), which every function of the team is built as."""
    iam_settled: Sleep
    """The stack's wait after every grant (`defaults.IAM_SETTLE`); the function is created after it."""
    archive: Archive
    """The source archive (`job_archive`), built by the stack once per source folder."""
    event_trigger: Cloudfunctions2FunctionEventTrigger | None = None
    """An Eventarc event job's trigger (`EventDelivery.event_trigger`); None for HTTP functions."""
    trigger_settled: Sleep | None = None
    """For a function with an Eventarc trigger: the stack's wait after the Eventarc agent's role
    and the trigger accounts' invoker grants, which the function (and so its trigger) follows."""


def runonce_environment(team: Team, function: SharedFunction) -> dict[str, str]:
    """The RUNONCE_* variables runonce reads, from the team and the function's jobs: the lease
    from the timeout they share, the longest retention among them, and for the proxy the
    target its jobs share (`RUNONCE_TARGET`, docs/targets.md)."""
    environment = {
        contract.PROJECT_VARIABLE: team.project,
        contract.DATABASE_VARIABLE: team.database,
        contract.COLLECTION_VARIABLE: team.collection,
        contract.LEASE_VARIABLE: str(function.first.lease_seconds),
        contract.RETENTION_VARIABLE: str(function.retention_seconds),
    }
    if function.settings.target:
        environment[TARGET_VARIABLE] = function.settings.target
    return environment


def job_archive(job: Job, out_dir: Path, extra_requirements: Sequence[str] = ()) -> Archive:
    """The job's folder at the archive root with the runonce library beside it, and
    `extra_requirements` after its requirements.txt's own lines (`store_requirements`)."""
    return build_archive(
        {"": job.source_dir, defaults.RUNONCE_PACKAGE: FUNCTIONS_DIR / defaults.RUNONCE_PACKAGE},
        out_dir,
        with_requirements(job.source_dir, extra_requirements, out_dir),
    )


def store_requirements(team: Team) -> tuple[str, ...]:
    """What a function of the team needs besides its folder's requirements: the `valkey` extra's
    pinned client (from functions/pyproject.toml, the library's own pin) for a team on Valkey,
    whose runonce loads `runonce.store.valkey`; nothing for Firestore."""
    if not isinstance(team.store, Valkey):
        return ()
    with (FUNCTIONS_DIR / "pyproject.toml").open("rb") as file:
        return tuple(tomllib.load(file)["project"]["optional-dependencies"]["valkey"])


class DeduplicatedFunction(Construct):
    """A gen2 function run as its own runtime account (`FunctionIdentity`) and built as the
    team's build account, internal ingress only. The source is uploaded under its content digest,
    so only a change redeploys. The function is created only after the stack's IAM wait
    (`iam_settled`), so the build finds its grants in force, and with create_before_destroy: a
    function its jobs move away from is destroyed only after their Scheduler jobs point elsewhere
    (docs/stacks.md, "Migration")."""

    def __init__(self, scope: Construct, id: str, props: DeduplicatedFunctionProps) -> None:
        super().__init__(scope, id)
        spec, identity = props.spec, props.identity
        self.props = props
        """The props it was built from."""
        self.identity = identity
        """The runtime account and its ledger grant."""
        self.archive = props.archive
        """The deterministic source archive (path and digest)."""
        self.source_object = props.build.upload(self.archive, spec.source)
        """The `google_storage_bucket_object` holding the archive (shared by jobs with the same files)."""

        self.function = Cloudfunctions2Function(
            self,
            "function",
            project=spec.project,
            location=spec.region,
            name=spec.name,
            description=spec.description or None,
            labels={**spec.labels, defaults.FUNCTION_LABEL: spec.label},
            build_config=Cloudfunctions2FunctionBuildConfig(
                runtime=spec.runtime,
                entry_point=spec.entry_point,
                service_account=resource_id(spec.project, props.build_email),
                docker_repository=props.build.repository_id,
                source=Cloudfunctions2FunctionBuildConfigSource(
                    storage_source=Cloudfunctions2FunctionBuildConfigSourceStorageSource(
                        bucket=props.build.bucket_name, object=naming.source_object_name(self.archive.digest)
                    )
                ),
            ),
            service_config=Cloudfunctions2FunctionServiceConfig(
                service_account_email=identity.runtime_email,
                ingress_settings=defaults.INGRESS,
                all_traffic_on_latest_revision=True,
                timeout_seconds=spec.timeout_seconds,
                available_memory=spec.memory,
                min_instance_count=spec.min_instances,
                max_instance_count=spec.max_instances,
                environment_variables=spec.environment,
            ),
            event_trigger=props.event_trigger,
            lifecycle=CREATE_BEFORE_DESTROY,
            depends_on=[
                *props.apis.of(defaults.API_FUNCTIONS, defaults.API_RUN, defaults.API_CLOUD_BUILD),
                # A function with an Eventarc trigger creates the trigger when it is deployed.
                *(props.apis.of(defaults.API_EVENTARC) if props.event_trigger else []),
                self.source_object,
                props.iam_settled,
                *([props.trigger_settled] if props.trigger_settled else []),
            ],
        )
        """The `google_cloudfunctions2_function`; Scheduler calls `service_config.uri` (run.app)."""
        # The run.app URI, not function.url (cloudfunctions.net): with internal-only ingress,
        # Scheduler counts as internal only on the run.app URL, and Cloud Run accepts ID tokens
        # whose audience is that URL. Read once per function (every job of it uses them), as
        # string attributes, one jsii round trip each, instead of through the typed
        # service_config block (three round trips).
        self.uri: str = self.function.get_string_attribute("service_config[0].uri")
        """The function's run.app URI (`service_config[0].uri`), which its Scheduler jobs call."""
        self.service: str = self.function.get_string_attribute("service_config[0].service")
        """The function's Cloud Run service name (`service_config[0].service`), which the
        invoker grant is on."""
