"""One team's stack: its own state, the ledger, the build storage, the team's build and invoker
accounts, a function (with its runtime account) per group of jobs with the same code and settings
(`stacks.config.sharing`), and a Scheduler job per job. Team config -> constructs -> resources, in that
order only."""

from __future__ import annotations

from pathlib import Path

from constructs import Construct

from stacks import naming
from stacks.config import defaults
from stacks.config.sharing import FunctionSettings, SharedFunction, explain, shared_functions
from stacks.config.state import local_state_file, missing_local_state
from stacks.config.store import Valkey
from stacks.config.team import EVENTARC, REPO_ROOT, ServiceJob, Team
from stacks.constructs import provider
from stacks.constructs.app_engine import AppEngineAccess
from stacks.constructs.archive import Archive
from stacks.constructs.build_storage import BuildStorage, BuildStorageProps
from stacks.constructs.dedup_store import DedupStore, DedupStoreProps
from stacks.constructs.deduplicated_function import (
    ARCHIVE_DIR,
    DeduplicatedFunction,
    DeduplicatedFunctionProps,
    FunctionSpec,
    job_archive,
    store_requirements,
)
from stacks.constructs.event_job import (
    EventDelivery,
    EventDeliveryProps,
    event_environment,
    grant_push_token_creator,
)
from stacks.constructs.function_identity import FunctionIdentity, FunctionIdentityProps
from stacks.constructs.identity import member
from stacks.constructs.legacy_accounts import keep_job_accounts
from stacks.constructs.monitoring import Monitoring, MonitoringProps
from stacks.constructs.operators import EventJobAccess, OperatorAccess, OperatorAccessProps, member_id
from stacks.constructs.provider import (
    DataGoogleProject,
    GoogleProvider,
    Sleep,
    TimeProvider,
)
from stacks.constructs.required_apis import RequiredApis, RequiredApisProps
from stacks.constructs.run_service import RunService, RunServiceProps, service_environment
from stacks.constructs.scheduled_job import ScheduledJob, ScheduledJobProps
from stacks.constructs.service_agents import declare_beta_provider, eventarc_agent, pubsub_agent
from stacks.constructs.store_access import attach_function, attach_service
from stacks.constructs.store_network import APIS as STORE_APIS
from stacks.constructs.store_network import StoreNetwork, StoreNetworkProps
from stacks.constructs.target_access import grant_target, target_apis
from stacks.constructs.team_identity import TeamIdentity, TeamIdentityProps
from stacks.constructs.valkey_store import ValkeyStore, ValkeyStoreProps
from stacks.constructs.watchdog import Watchdog, WatchdogProps
from stacks.contract import ACKNOWLEDGED, EVENT_CONSUMER_FIELD, EVENT_SOURCE_FIELD
from stacks.toolchain import Annotations, GcsBackend, LocalBackend, TerraformStack
from stacks.validate import windows


class TeamStack(TerraformStack):
    """Everything one team file deploys, named after the team. Validate the team first
    (`stacks.validate.validate`): this class builds what it is given."""

    def __init__(self, scope: Construct, team: Team, archive_dir: Path = ARCHIVE_DIR) -> None:
        super().__init__(scope, team.name)
        self.team = team
        """The team config this stack was built from."""
        if team.state is None:
            # Relative to cdktf.out/stacks/<team>: the state file sits at the repository root.
            LocalBackend(self, path=f"../../../{local_state_file(team.name)}")
            warning = missing_local_state(team.name, REPO_ROOT)
            if warning:
                Annotations.of(self).add_warning(warning)
        else:
            GcsBackend(self, bucket=team.state.bucket, prefix=team.state.prefix)
        google = GoogleProvider(self, "google", project=team.project, region=team.region)
        TimeProvider(self, "time")
        # As an override: cdktf would rewrite the label keys' hyphens to underscores.
        google.add_override("default_labels", {**team.labels, "runonce-team": team.name})
        if team.acknowledge:
            # For `make policy` (policy/acknowledgements.py), in a comment Terraform ignores.
            self.add_override(ACKNOWLEDGED, dict(team.acknowledge))
        # Every API the stacks call, and the ones the team's proxies call for their targets.
        target_services = {
            api for job in team.jobs if job.target is not None for api in target_apis(job.target)
        }
        if team.event_jobs:
            target_services.add(defaults.API_PUBSUB)
        if any(job.trigger == EVENTARC for job in team.event_jobs):
            target_services.add(defaults.API_EVENTARC)
        if isinstance(team.store, Valkey):
            target_services.update(STORE_APIS)
        services = (*defaults.REQUIRED_APIS, *sorted(target_services - set(defaults.REQUIRED_APIS)))
        self.apis = RequiredApis(self, "apis", RequiredApisProps(project=team.project, services=services))
        """The enabled APIs."""
        self.store = DedupStore(
            self,
            "ledger",
            DedupStoreProps(
                project=team.project,
                database=team.database,
                location=team.location,
                collection=team.collection,
                apis=self.apis,
                delete_protection=team.delete_protection,
                point_in_time_recovery=team.point_in_time_recovery,
                listed_by=tuple(
                    sorted(
                        {
                            EVENT_CONSUMER_FIELD if job.trigger == EVENTARC else EVENT_SOURCE_FIELD
                            for job in team.event_jobs
                        }
                    )
                ),
            ),
        )
        """The team's run ledger."""
        # The store (issue 32): a team on Valkey gets its instance and the network to reach it.
        self.store_network: StoreNetwork | None = None
        """The Valkey store's network, subnetwork, connection policy and connector; None on Firestore."""
        self.valkey: ValkeyStore | None = None
        """The Valkey instance (or its data source) and its URL and CA; None on Firestore."""
        if isinstance(team.store, Valkey):
            self.store_network = StoreNetwork(
                self,
                "store-network",
                StoreNetworkProps(
                    project=team.project,
                    region=team.region,
                    team=team.name,
                    network=team.store.network,
                    apis=self.apis,
                    machine_type=team.store.connector_machine_type,
                    min_instances=team.store.connector_min_instances,
                    max_instances=team.store.connector_max_instances,
                    connection_policy=not team.store.existing,
                ),
            )
            self.valkey = ValkeyStore(
                self,
                "valkey",
                ValkeyStoreProps(
                    project=team.project,
                    region=team.region,
                    team=team.name,
                    store=team.store,
                    network=self.store_network,
                    apis=self.apis,
                ),
            )
        self.build = BuildStorage(
            self,
            "build",
            BuildStorageProps(
                project=team.project,
                region=team.region,
                team=team.name,
                apis=self.apis,
                force_destroy=team.force_destroy,
            ),
        )
        """The team's source bucket and image repository."""
        self.project = DataGoogleProject(self, "project", project_id=team.project)
        """The `google_project` data source: the project number names Google's source bucket."""
        project_number = self.project.number  # read once: each read is a jsii round trip
        gcf_sources = naming.gcf_sources_bucket(project_number, team.region)
        self.identity = TeamIdentity(
            self,
            TeamIdentityProps(
                project=team.project,
                team=team.name,
                needs_invoker=team.needs_invoker,
                build=self.build,
                apis=self.apis,
                gcf_sources_bucket=gcf_sources,
            ),
        )
        """The team's build account (with its grants) and its Scheduler invoker account."""
        self.shared_functions = shared_functions(team)
        """Which jobs run on which function (`stacks.config.sharing`), in team-file order."""
        # Printed by `cdktf synth`: which jobs share a function, which code runs on several.
        Annotations.of(self).add_info("\n".join(explain(team)))
        # An event job's function is its own (never shared with a scheduled job: its entry point
        # answers Pub/Sub pushes), built from the same settings a scheduled job's function is.
        self.event_functions = [
            SharedFunction(job.name, FunctionSettings.of(built), (built,))
            for job in team.event_jobs
            for built in [job.function_job(event_environment(team, job))]
        ]
        """The event jobs' functions, in team-file order."""
        functions = [*self.shared_functions, *self.event_functions]
        # Read from Cloud Storage, which creates the agent if it does not exist yet; its email,
        # interpolated from the project number, "may cause Terraform apply errors in cases where
        # the service account does not yet exist" (the data source's docs).
        self.storage_agent = (
            provider.DataGoogleStorageProjectServiceAccount(
                self, "storage-agent", project=team.project, depends_on=self.apis.of(defaults.API_STORAGE)
            )
            if any(job.bucket for job in team.event_jobs if job.trigger == EVENTARC)
            else None
        )
        """The `google_storage_project_service_account` data source, for teams with a bucket trigger."""
        storage_agent_member = self.storage_agent.member if self.storage_agent is not None else ""
        self.pubsub_agent = pubsub_agent(self, team.project, self.apis) if team.event_jobs else None
        """The Pub/Sub service agent and its role, for teams with event jobs: every grant to the
        agent names its `member` (`stacks.constructs.service_agents`)."""
        pubsub_agent_member = self.pubsub_agent[0].get_string_attribute("member") if self.pubsub_agent else ""
        pubsub_agent_role = [self.pubsub_agent[1]] if self.pubsub_agent else []
        # Every account and grant first, then one wait after all grants, then the functions: a
        # build started before its grants settle cannot fetch its source.
        identities = {
            function.name: FunctionIdentity(
                self,
                f"{function.name}-identity",
                FunctionIdentityProps(
                    project=team.project,
                    team=team.name,
                    function=function.name,
                    store=self.store,
                    apis=self.apis,
                ),
            )
            for function in functions
        }
        self.services = {
            service.name: RunService(
                self,
                RunServiceProps(
                    team=team,
                    service=service,
                    retention_seconds=max(
                        (job.retention_seconds for job in team.service_jobs if job.service == service.name),
                        default=ServiceJob.retention_seconds,
                    ),
                    store=self.store,
                    apis=self.apis,
                ),
            )
            for service in team.services
        }
        """Each Cloud Run service the team's service jobs call, deployed or existing, by name
        (`stacks.constructs.run_service`)."""
        self.app_engine = AppEngineAccess(self, team, self.store, self.apis) if team.app_engine_jobs else None
        """The App Engine application's check and its accounts' ledger grants; None without App
        Engine jobs (`stacks.constructs.app_engine`)."""
        app_engine_grants = self.app_engine.ledger_grants if self.app_engine is not None else []
        app_engine_checks = self.app_engine.checks if self.app_engine is not None else []
        # A proxy's account may start its target (and nothing else): granted before the proxy
        # exists, so that the grant has settled before its first run (a 403 is a permanent failure).
        self.target_grants = {
            function.name: grant_target(
                self,
                f"{function.name}-identity",
                team.project,
                function.first.target,
                identities[function.name].runtime_email,
                self.apis,
            )
            for function in self.shared_functions
            if function.first.target is not None
        }
        """The grants that let each proxy's account start its target, by function name."""
        self.events = {
            job.name: EventDelivery(
                self,
                f"{job.name}-events",
                EventDeliveryProps(
                    project=team.project,
                    region=team.region,
                    team=team.name,
                    job=job,
                    runtime_email=identities[job.name].runtime_email,
                    invoker_email=self.identity.invoker_email,
                    pubsub_agent=pubsub_agent_member,
                    project_data=self.project.fqn,
                    storage_agent_member=storage_agent_member,
                    apis=self.apis,
                ),
            )
            for job in team.event_jobs
        }
        """Each event job's topics, dead-letter subscription and publisher grants, by job name."""
        self.watchdog = (
            Watchdog(
                self,
                "watchdog",
                WatchdogProps.of(
                    team,
                    self.store,
                    self.identity.invoker_email,
                    self.apis,
                    {job.name: windows.grace_seconds(job) for job in team.scheduled_views},
                ),
            )
            if team.watched
            else None
        )
        """The team's watchdog (`stacks.constructs.watchdog`); None without scheduled jobs or with
        `Team.watchdog` off. Its function is deployed last, after every Scheduler job it watches."""
        watchdog_grants = self.watchdog.grants if self.watchdog is not None else []
        deployed = sorted(name for name, service in self.services.items() if service.identity is not None)
        self.iam_settled = Sleep(
            self,
            "iam-settled",
            create_duration=defaults.IAM_SETTLE,
            # A time_sleep waits on create only; a changed trigger re-creates it, so a function
            # added later waits for its own grants too.
            triggers={
                "functions": ",".join(sorted([*identities, *([naming.WATCHDOG] if self.watchdog else [])])),
                **({"services": ",".join(deployed)} if deployed else {}),
                # Turning catch-up on adds the watchdog's catch-up grants: wait for them too.
                **({"catch_up": naming.WATCHDOG} if self.watchdog and self.watchdog.props.catches_up else {}),
            },
            depends_on=[
                *self.identity.build_grants,
                *watchdog_grants,
                *(identity.ledger_grant for identity in identities.values()),
                *(service.ledger_grant for service in self.services.values()),
                *app_engine_grants,
                *(grant for grants in self.target_grants.values() for grant in grants),
                *(grant for events in self.events.values() for grant in events.grants),
                *pubsub_agent_role,
            ],
        )
        """The `time_sleep` after every grant of the build account and of every runtime account;
        each function waits for it. It waits again whenever the set of functions changes."""
        eventarc_jobs = [events for events in self.events.values() if events.trigger_invoker is not None]
        self.eventarc_agent = eventarc_agent(self, team.project, self.apis) if eventarc_jobs else None
        """The Eventarc service agent and its role, for teams with an Eventarc job
        (`stacks.constructs.service_agents`)."""
        if self.pubsub_agent is not None:
            declare_beta_provider(self, team.project, team.region)
        self.trigger_settled = (
            Sleep(
                self,
                "trigger-settled",
                create_duration=defaults.INVOKER_SETTLE,
                triggers={"functions": ",".join(sorted(job.props.job.name for job in eventarc_jobs))},
                depends_on=[
                    *self.eventarc_agent,
                    *(events.trigger_invoker for events in eventarc_jobs if events.trigger_invoker),
                    *(events.bucket_check for events in eventarc_jobs if events.bucket_check),
                ],
            )
            if self.eventarc_agent is not None
            else None
        )
        """The `time_sleep` (the IAM propagation time, as before a Scheduler job) after the Eventarc
        agent's role and every trigger account's invoker grant (and the bucket triggers' bucket
        checks); each function with a trigger follows it, so the trigger is created and delivers
        only once both grants are in effect, and never on a bucket that failed its check."""
        self.functions: dict[str, DeduplicatedFunction] = {}
        """Each function, by its name (the name of its first job)."""
        archives: dict[str, Archive] = {}  # one per source folder: zipping and hashing cost time
        for shared in functions:
            source = shared.settings.source
            if source not in archives:
                archives[source] = job_archive(shared.first, archive_dir, store_requirements(team))
            self.functions[shared.name] = DeduplicatedFunction(
                self,
                f"{shared.name}-function",
                DeduplicatedFunctionProps(
                    spec=FunctionSpec.of(team, shared),
                    build=self.build,
                    apis=self.apis,
                    identity=identities[shared.name],
                    build_email=self.identity.build_email,
                    iam_settled=self.iam_settled,
                    archive=archives[source],
                    event_trigger=self.events[shared.name].event_trigger()
                    if shared.name in self.events
                    else None,
                    trigger_settled=self.trigger_settled
                    if shared.name in self.events and self.events[shared.name].trigger_invoker
                    else None,
                ),
            )
        for name in deployed:
            self.services[name].deploy(after=[self.iam_settled])
        self.function_of: dict[str, DeduplicatedFunction] = {
            job.name: self.functions[shared.name] for shared in self.shared_functions for job in shared.jobs
        }
        """The function each job's Scheduler job calls, by job name."""
        self.jobs: dict[str, ScheduledJob] = {
            job.name: ScheduledJob(
                self,
                f"{job.name}-schedule",
                ScheduledJobProps.of(team, job, self.identity.invoker_email, self.apis),
            )
            for job in team.scheduled_views
        }
        """Each job's Scheduler job, by job name: the function jobs', then the service and App
        Engine jobs'."""
        self.retiring_accounts = [
            account
            for job in team.jobs
            if team.keep_per_job_accounts
            for account in keep_job_accounts(
                self,
                self.jobs[job.name],
                team.project,
                team.name,
                job.name,
                self.build,
                self.apis,
                gcf_sources,
            )
        ]
        """Migration step 1 only (`Team.keep_per_job_accounts`): each job's old build and invoker
        accounts, kept unused for this one apply (`stacks.constructs.legacy_accounts`)."""
        # The invoker's grant on each function sits on the construct of the function's first job,
        # where that job's own invoker grant sat before functions were shared (ScheduledJob).
        invoker_grants = {
            shared.name: self.jobs[shared.name].grant_invoker(self.functions[shared.name])
            for shared in self.shared_functions
        }
        # A service's invoker grant sits on the construct of its first job, as a function's does.
        calling = {name: [job for job in team.service_jobs if job.service == name] for name in self.services}
        invoker_grants.update(
            {
                name: self.jobs[jobs[0].name].grant_invoker(self.services[name])
                for name, jobs in calling.items()
                if jobs
            }
        )
        # The push functions' grants sit on their event constructs, one each (an Eventarc trigger's
        # account has its own, made before its function).
        pushes = [name for name, events in self.events.items() if events.props.job.trigger != EVENTARC]
        invoker_grants.update(
            {name: self.events[name].grant_invoker(self.functions[name]) for name in pushes}
        )
        self.push_token_creator = (
            grant_push_token_creator(self, self.identity.invoker_account, pubsub_agent_member, self.apis)
            if pushes and self.identity.invoker_account is not None
            else None
        )
        """The Pub/Sub service agent's token creator grant on the invoker account, which push
        subscriptions sign as (`grant_push_token_creator`); None for a team without push jobs."""
        token_grants = [self.push_token_creator] if self.push_token_creator is not None else []
        self.invoker_settled = Sleep(
            self,
            "invoker-settled",
            create_duration=defaults.INVOKER_SETTLE,
            triggers={"functions": ",".join(sorted(invoker_grants))},
            depends_on=[*invoker_grants.values(), *token_grants, *pubsub_agent_role],
        )
        """The `time_sleep` after every invoker grant (and the push token creator grant and the
        Pub/Sub agent's role, which signs the push tokens): a
        Scheduler job or push subscription is created, or repointed to another function or
        invoker, only once the grants it needs have had time to settle."""
        for shared in self.shared_functions:
            function, grant = self.functions[shared.name], invoker_grants[shared.name]
            for job in shared.jobs:
                self.jobs[job.name].schedule(function, after=[grant, self.invoker_settled])
        for service_job in team.service_jobs:
            self.jobs[service_job.name].schedule(
                self.services[service_job.service],
                after=[invoker_grants[service_job.service], self.invoker_settled],
                path=service_job.path,
            )
        for app_engine_job in team.app_engine_jobs:
            # No invoker: an App Engine target carries no token. After the ledger grants have settled
            # and the application's check passed.
            self.jobs[app_engine_job.name].schedule_app_engine(
                app_engine_job, after=[self.iam_settled, *app_engine_checks]
            )
        for name in pushes:
            after = [invoker_grants[name], *token_grants, self.invoker_settled]
            self.events[name].subscribe(self.functions[name], after=after)
        if self.watchdog is not None:
            scheduled = {name: job.job for name, job in self.jobs.items() if job.job is not None}
            self.watchdog.deploy(
                self.build, self.identity.build_email, self.iam_settled, archive_dir, scheduled
            )
        if self.valkey is not None and self.store_network is not None:
            self._attach_store(self.valkey, self.store_network)
        self.operators = (
            OperatorAccess(
                self,
                "operators",
                OperatorAccessProps(
                    project=team.project,
                    team=team.name,
                    members=tuple(team.operators),
                    ledger=self.store,
                    event_jobs=tuple(
                        EventJobAccess(
                            job=name,
                            dead_letters=events.dead_letters.name,
                            topic=events.topic.name if events.topic is not None else events.props.job.topic,
                        )
                        for name, events in self.events.items()
                    ),
                    scheduled=team.scheduled,
                    apis=self.apis,
                    resumes=self.watchdog is not None and self.watchdog.props.pauses,
                    watchdog_records=(
                        self.watchdog.store if self.watchdog is not None and self.valkey is None else None
                    ),
                ),
            )
            if team.operators
            else None
        )
        """The operators' grants (`Team.operators`, `stacks.constructs.operators`); None without any."""
        if self.valkey is not None:
            for principal in team.operators:
                self.valkey.grant_connection(f"operator-{member_id(principal)}", principal)
        run_services = {name: function.service for name, function in self.functions.items()}
        # A service's `service_name` label is its short name, which the team file gives.
        run_services.update({name: name for name in self.services})
        if self.watchdog is not None and self.watchdog.function is not None:
            # Its ticks are answered like any job's: a watchdog that fails alerts too. No job may
            # be called "watchdog" (stacks.validate.watchdog), so the name is its own.
            run_services["watchdog"] = self.watchdog.function.service
        self.monitoring = (
            Monitoring(self, "monitoring", MonitoringProps.of(team, run_services, self.apis))
            if run_services or team.app_engine_jobs
            else None
        )
        """The team's log-based metrics, alert policies, e-mail channels and dashboard
        (docs/monitoring.md); None for a team without functions, services or App Engine jobs."""

    def _attach_store(self, valkey: ValkeyStore, network: StoreNetwork) -> None:
        """Every function (the watchdog's too) and every deployed service of the team gets the
        store's variables, its path into the VPC (`stacks.constructs.store_access`) and, with IAM
        authentication, the connection role on the one instance (operators' in `__init__`)."""
        functions = dict(self.functions)
        if self.watchdog is not None and self.watchdog.function is not None:
            functions["watchdog"] = self.watchdog.function  # no job is called "watchdog"
        for name, function in functions.items():
            attach_function(function, valkey.environment, network)
            valkey.grant_connection(f"function-{name}", member(function.identity.runtime_email))
        for service in self.services.values():
            if service.deployed is None:
                continue
            props = service.props
            valkey.grant_connection(f"service-{props.service.name}", member(service.runtime_email))
            environment = {
                **service_environment(self.team, props.service, props.retention_seconds),
                **props.service.env,
                **valkey.environment,
            }
            attach_service(service.deployed, environment, network)
