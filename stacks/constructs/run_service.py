"""A Cloud Run service that service jobs call: deployed by the stack from the team's image, or an
existing one the stack reads (docs/stacks/services.md cites each choice).

Deployed: `google_cloud_run_v2_service` with ingress `INGRESS_TRAFFIC_INTERNAL_ONLY` (Cloud
Scheduler in the same project counts as internal when it calls the default run.app URL, Cloud Run's
"Restrict network ingress" page), its own runtime account (`FunctionIdentity`, the ledger and
nothing else), the request timeout, concurrency and scaling of the team file, and the RUNONCE_*
variables. Existing: the `google_cloud_run_v2_service` data source, which fails the plan with
"projects/P/locations/R/services/NAME not found" when there is no such service, and postconditions
on what a plan can see (a runtime account of its own, a run.app URL, its request timeout); its
runtime account gets the ledger. Any of its ingress settings admits Scheduler on the run.app URL
(`INGRESS`). Either way each Scheduler job's invoker gets `roles/run.invoker` on this service only
(`ScheduledJob.grant_invoker`). Like `FunctionIdentity`, a plain class whose resources live in the
stack, ids prefixed with the service's name.
"""

from __future__ import annotations

from dataclasses import dataclass

from constructs import Construct

from runonce import contract
from stacks.config import defaults
from stacks.config.team import Service, Team
from stacks.constructs import provider
from stacks.constructs.dedup_store import DedupStore
from stacks.constructs.function_identity import FunctionIdentity, FunctionIdentityProps, grant_ledger
from stacks.constructs.identity import member
from stacks.constructs.provider import ProjectIamMember
from stacks.constructs.required_apis import RequiredApis
from stacks.toolchain import ITerraformDependable, Postcondition, TerraformResourceLifecycle

INGRESS = "INGRESS_TRAFFIC_INTERNAL_ONLY"
"""A deployed service's ingress: internal traffic and, from the same project on the run.app URL,
Cloud Scheduler (Cloud Run, "Restrict network ingress"). `INGRESS_TRAFFIC_INTERNAL_LOAD_BALANCER`
admits all of that and Cloud Load Balancing too, `INGRESS_TRAFFIC_ALL` everyone: an existing
service may have any of the three."""
EXECUTION_ENVIRONMENT_BELOW_ONE_VCPU = "EXECUTION_ENVIRONMENT_GEN1"
"""A deployed service's execution environment when its cpu is below one vCPU, which Cloud Run allows
only there ("Configure CPU limits"); otherwise none is set and Cloud Run chooses."""
USER_MANAGED_ACCOUNT = r"^[a-z][a-z0-9-]{4,28}[a-z0-9]@[a-z0-9.-]+\\.iam\\.gserviceaccount\\.com$"
"""A user-managed service account's email, `NAME@PROJECT.iam.gserviceaccount.com` (IAM, "Service
account types"), as an RE2 pattern inside a Terraform string (backslashes doubled). The default
accounts (`PROJECT_NUMBER-compute@developer.gserviceaccount.com`,
`PROJECT@appspot.gserviceaccount.com`) do not match it; service agents
(`service-PROJECT_NUMBER@gcp-sa-SERVICE.iam.gserviceaccount.com`) do."""


def service_environment(team: Team, service: Service, retention_seconds: int) -> dict[str, str]:
    """The RUNONCE_* variables a service's handlers read: the ledger, the lease from the service's
    request timeout, and the longest retention among its jobs."""
    return {
        contract.PROJECT_VARIABLE: team.project,
        contract.DATABASE_VARIABLE: team.database,
        contract.COLLECTION_VARIABLE: team.collection,
        contract.LEASE_VARIABLE: str(service.lease_seconds),
        contract.RETENTION_VARIABLE: str(retention_seconds),
    }


@dataclass(frozen=True)
class RunServiceProps:
    """One service of the team and what its runtime account may reach."""

    team: Team
    """The team (project, region, ledger names, labels)."""
    service: Service
    """The service, from `Team.services`."""
    retention_seconds: int
    """The longest retention among the jobs that call it (RUNONCE_RETENTION_SECONDS)."""
    store: DedupStore
    """The team's ledger; the runtime account may use this database and nothing else."""
    apis: RequiredApis
    """The stack's enabled APIs."""


class RunService:
    """One Cloud Run service of the team, in `scope` with ids starting with the service's name.

    Built in two steps by `TeamStack`, like the functions: the runtime account and its ledger grant
    first (before the stack's one wait for grants to settle), then `deploy` for a deployed service.
    """

    def __init__(self, scope: Construct, props: RunServiceProps) -> None:
        self.scope = scope
        self.props = props
        service, team = props.service, props.team
        self.name = service.name
        """The service's short name, which the invoker grant names and the `service_name` label of
        its `cloud_run_revision` logs carries."""
        self.existing: provider.DataGoogleCloudRunV2Service | None = None
        """The data source of an existing service; None for a deployed one."""
        self.identity: FunctionIdentity | None = None
        """A deployed service's own runtime account and ledger grant; None for an existing one."""
        self.deployed: provider.CloudRunV2Service | None = None
        """The deployed `google_cloud_run_v2_service`, once `deploy` ran."""
        if service.deployed:
            self.identity = FunctionIdentity(
                scope,
                f"{service.name}-service-identity",
                FunctionIdentityProps(
                    project=team.project,
                    team=team.name,
                    function=service.name,
                    store=props.store,
                    apis=props.apis,
                    kind="service",
                ),
            )
            self.runtime_email = self.identity.runtime_email
            self.ledger_grant: ProjectIamMember = self.identity.ledger_grant
            return
        self.existing = self._read_existing()
        self.runtime_email = self.existing.template.get(0).service_account
        self.ledger_grant = grant_ledger(
            scope, f"{service.name}-service-ledger", team.project, member(self.runtime_email), props.store
        )
        """roles/datastore.user on the ledger database only, for the service's runtime account."""

    @property
    def uri(self) -> str:
        """The service's run.app URL (no path): the Scheduler jobs' base URL and OIDC audience."""
        if self.existing is not None:
            return self.existing.uri
        if self.deployed is None:
            raise RuntimeError(f"service {self.name}: deploy() first")
        return self.deployed.uri

    @property
    def service(self) -> str:
        """The name `roles/run.invoker` is granted on: the deployed resource's or the data source's
        `name` (a reference, so the grant follows the service)."""
        if self.existing is not None:
            return self.existing.name
        if self.deployed is None:
            raise RuntimeError(f"service {self.name}: deploy() first")
        return self.deployed.name

    def _read_existing(self) -> provider.DataGoogleCloudRunV2Service:
        service, team = self.props.service, self.props.team
        where = f"Cloud Run service {service.name} ({team.project}, {team.region})"
        account = "self.template[0].service_account"
        return provider.DataGoogleCloudRunV2Service(
            self.scope,
            f"{service.name}-service",
            name=service.name,
            location=team.region,
            project=team.project,
            # No depends_on: a service that exists has the Run API enabled, and a data source that
            # depends on resources still to be created is read only at apply time, not at plan time.
            lifecycle=TerraformResourceLifecycle(
                postcondition=[
                    # The API fills in an unset account with the Compute Engine default one, so
                    # the account is never empty: refuse what is not an account of its own.
                    Postcondition(
                        condition=f'${{can(regex("{USER_MANAGED_ACCOUNT}", {account}))}}',
                        error_message=f"{where} runs as ${{{account}}}, which is "
                        "not a user-managed service account (NAME@PROJECT.iam.gserviceaccount.com) but a "
                        "default one that other workloads share (Compute Engine's "
                        "PROJECT_NUMBER-compute@developer.gserviceaccount.com, App Engine's "
                        "PROJECT@appspot.gserviceaccount.com): the stack would grant the ledger to all of "
                        f"them. Give the service an account of its own (gcloud run services update "
                        f"{service.name} --region={team.region} --service-account=ACCOUNT), then plan again.",
                    ),
                    Postcondition(
                        condition='${self.uri != ""}',
                        error_message=f"{where} has no run.app URL (its default URL is disabled): Cloud "
                        "Scheduler calls that URL, and Cloud Run admits it as internal traffic only there. "
                        "Turn the service's default URL back on (defaultUriDisabled false), or remove the "
                        "service's jobs.",
                    ),
                    Postcondition(
                        condition=f'${{self.template[0].timeout == "{service.timeout_seconds}s"}}',
                        error_message=f"{where} has another request timeout than the team file's "
                        f"timeout_seconds ({service.timeout_seconds}): the lease derives from it. Set "
                        "timeout_seconds in the team file to the service's timeout.",
                    ),
                ]
            ),
        )

    def deploy(self, after: list[ITerraformDependable]) -> provider.CloudRunV2Service:
        """The deployed service, created `after` its runtime account's grants have settled."""
        props, service = self.props, self.props.service
        if self.identity is None:
            raise RuntimeError(f"service {service.name} exists already: nothing to deploy")
        team = props.team
        environment = {**service_environment(team, service, props.retention_seconds), **service.env}
        self.deployed = provider.CloudRunV2Service(
            self.scope,
            f"{service.name}-service",
            project=team.project,
            location=team.region,
            name=service.name,
            ingress=INGRESS,
            # The service holds no data: a replacement or a destroy must not stop at it.
            deletion_protection=False,
            labels=service.labels or None,
            template=provider.CloudRunV2ServiceTemplate(
                # Below one vCPU Cloud Run requires the first generation ("Configure CPU limits").
                execution_environment=EXECUTION_ENVIRONMENT_BELOW_ONE_VCPU
                if service.below_one_vcpu
                else None,
                service_account=self.runtime_email,
                timeout=f"{service.timeout_seconds}s",
                max_instance_request_concurrency=service.concurrency,
                scaling=provider.CloudRunV2ServiceTemplateScaling(
                    min_instance_count=service.min_instances, max_instance_count=service.max_instances
                ),
                containers=[
                    provider.CloudRunV2ServiceTemplateContainers(
                        image=service.image,
                        env=[
                            provider.CloudRunV2ServiceTemplateContainersEnv(name=name, value=value)
                            for name, value in sorted(environment.items())
                        ],
                        resources=provider.CloudRunV2ServiceTemplateContainersResources(
                            # Request-based billing, stated: with `resources` set, 6.50 needs
                            # cpu_idle=true to keep it (docs/stacks/services.md says why).
                            cpu_idle=True,
                            limits={"cpu": service.cpu, "memory": service.memory},
                        ),
                    )
                ],
            ),
            depends_on=[*props.apis.of(defaults.API_RUN), *after],
        )
        return self.deployed
