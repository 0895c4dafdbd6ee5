"""One event job's delivery: a Pub/Sub push subscription to its function, with a retry policy, a
dead-letter topic and the grants dead-lettering needs; or the function's own Eventarc trigger
(docs/stacks.md, "Event jobs")."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from constructs import Construct

from stacks import naming
from stacks.config import defaults
from stacks.config.team import EVENTARC, EventJob, Team
from stacks.constructs import provider
from stacks.constructs.identity import member, service_account
from stacks.constructs.provider import (
    Cloudfunctions2FunctionEventTrigger,
    Cloudfunctions2FunctionEventTriggerEventFilters,
    CloudRunV2ServiceIamMember,
    ProjectIamMember,
    PubsubSubscription,
    PubsubSubscriptionDeadLetterPolicy,
    PubsubSubscriptionExpirationPolicy,
    PubsubSubscriptionIamMember,
    PubsubSubscriptionPushConfig,
    PubsubSubscriptionPushConfigOidcToken,
    PubsubSubscriptionRetryPolicy,
    PubsubTopic,
    PubsubTopicIamMember,
    ServiceAccount,
    ServiceAccountIamMember,
)
from stacks.constructs.required_apis import RequiredApis
from stacks.constructs.scheduled_job import Invoked, grant_run_invoker, seconds
from stacks.contract import DEAD_LETTER_TOPIC_VARIABLE, JOB_VARIABLE, MAX_EVENT_AGE_VARIABLE
from stacks.toolchain import ITerraformDependable, Postcondition, TerraformResourceLifecycle


def event_environment(team: Team, job: EventJob) -> dict[str, str]:
    """The event variables runonce reads: the maximum event age, the dead-letter topic as the
    full path `projects/P/topics/T` (the library's settings accept that form), and the job's
    team-file name, the `job` field of the function's log lines (each event job has a function of
    its own), which the metrics and alerts label by and `runonce dead-letters --job` takes."""
    topic = naming.dead_letter_topic_name(team.name, job.name)
    return {
        MAX_EVENT_AGE_VARIABLE: str(job.max_event_age_seconds),
        DEAD_LETTER_TOPIC_VARIABLE: naming.topic_path(team.project, topic),
        JOB_VARIABLE: job.name,
    }


def grant_push_token_creator(
    scope: Construct, invoker: ServiceAccount, pubsub_agent: str, apis: RequiredApis
) -> ServiceAccountIamMember:
    """roles/iam.serviceAccountTokenCreator for the Pub/Sub service agent on the team's invoker
    account only, the account every push subscription of the team signs its OIDC tokens as.

    In a project created on or before April 8, 2021 the agent may not create those tokens
    without it, and every push is refused (Cloud Run's "Use Pub/Sub with Cloud Run" tutorial);
    later projects' agents already hold roles/pubsub.serviceAgent, and the grant changes nothing
    there. Google's pages grant it on the project; a role granted on a service account applies to
    that account alone (IAM, "Roles for service account authentication": the principal needs the
    permissions "on the service account"), so the agent can sign as no other account of the
    project. One grant per team, in `time_sleep.invoker-settled` like the invoker grants."""
    return _agent_token_creator(scope, "team-invoker-push-token-creator", invoker, pubsub_agent, apis)


def _agent_token_creator(
    scope: Construct, id: str, account: ServiceAccount, pubsub_agent: str, apis: RequiredApis
) -> ServiceAccountIamMember:
    """roles/iam.serviceAccountTokenCreator for the Pub/Sub service agent (`pubsub_agent`, its
    member) on `account` only."""
    return ServiceAccountIamMember(
        scope,
        id,
        service_account_id=account.name,
        role=defaults.ROLE_TOKEN_CREATOR,
        member=pubsub_agent,
        depends_on=apis.of(defaults.API_IAM),
    )


@dataclass(frozen=True)
class EventDeliveryProps:
    """The event job, the accounts involved and the project's Pub/Sub service agent."""

    project: str
    """The team's project id: every resource, and the bucket a bucket trigger listens to, is in it."""
    region: str
    """The team's region: the function's, and a Pub/Sub trigger's."""
    team: str
    """The team's name: prefixes the topics', subscriptions' and trigger account's names."""
    job: EventJob
    """Topic, retry policy, retry window, delivery attempts, timeout."""
    runtime_email: str
    """The function's runtime account, which publishes runonce's dead letters."""
    invoker_email: str
    """The team's invoker account, which signs the push requests' OIDC tokens."""
    pubsub_agent: str
    """The Pub/Sub service agent as an IAM principal: the `member` of the stack's
    `google_project_service_identity` for Pub/Sub (`stacks.constructs.service_agents`), so every
    grant to it follows the agent's creation."""
    project_data: str
    """The address of the stack's `google_project` data source (`data.google_project.X`), whose
    number a bucket trigger's bucket must have."""
    storage_agent_member: str
    """The Cloud Storage service agent as an IAM principal, from the stack's
    `google_storage_project_service_account` data source ("" for a team without bucket jobs)."""
    apis: RequiredApis
    """The stack's enabled APIs."""


class EventDelivery(Construct):
    """An event job's delivery, built in steps by `TeamStack`.

    1. On construction, before the functions: the topic (unless the job names an existing one or
       a bucket), the dead-letter topic and its 7-day pull subscription, and publisher on the
       dead-letter topic for the runtime account and, for push, for the Pub/Sub service agent;
       for Eventarc, the trigger account and its grants (`grants`, which the stack's IAM wait
       includes).
    2. `event_trigger`, for Eventarc: the block the function is deployed with.
    3. `grant_invoker`, for push: run.invoker on the function's service for the team's invoker.
       An Eventarc trigger's account gets run.invoker in step 1 instead (`trigger_invoker`), before
       the function and its trigger exist.
    4. `subscribe`, for push, once that grant has settled: the push subscription to the
       function's run.app URI with an OIDC token for that audience, and subscriber on it for the
       service agent (which dead-lettering needs to acknowledge the source message).
    """

    def __init__(self, scope: Construct, id: str, props: EventDeliveryProps) -> None:
        super().__init__(scope, id)
        self.props = props
        job = props.job
        pubsub = props.apis.of(defaults.API_PUBSUB)
        self.service_agent = props.pubsub_agent
        """The Pub/Sub service agent as an IAM principal."""
        self.topic: PubsubTopic | None = None
        """The topic the stack created, or None when the job names an existing one (or its
        Eventarc trigger listens to a bucket)."""
        self.topic_id = ""
        """The topic's id (`projects/P/topics/T`), "" for a bucket trigger."""
        # A Cloud Storage trigger (`bucket`) has no topic of the job's own.
        if job.topic and not job.bucket:
            self.topic_id = naming.topic_path(props.project, job.topic)
        elif not job.bucket:
            self.topic = self._topic("topic", naming.topic_name(props.team, job.name))
            self.topic_id = self.topic.id
        self.dead_letter_topic = self._topic(
            "dead-letter-topic", naming.dead_letter_topic_name(props.team, job.name)
        )
        """Where runonce (permanent failures, too old events) and Pub/Sub (delivery attempts
        used up) put the events that did not end in an effect."""
        self.dead_letters = PubsubSubscription(
            self,
            "dead-letter-subscription",
            project=props.project,
            name=naming.dead_letter_subscription_name(props.team, job.name),
            topic=self.dead_letter_topic.id,
            message_retention_duration=defaults.DEAD_LETTER_RETENTION,
            expiration_policy=PubsubSubscriptionExpirationPolicy(ttl=""),
            labels=job.labels or None,
            depends_on=pubsub,
        )
        """The pull subscription that keeps dead letters for 7 days, until someone reads them."""
        self.grants: list[ITerraformDependable] = [
            self._dead_letter_publisher("runtime-dead-letter-publisher", member(props.runtime_email))
        ]
        """Publisher on the dead-letter topic for the runtime account (runonce's dead letters) and,
        for push, for the service agent (Pub/Sub's); for Eventarc, the trigger account's, the
        Pub/Sub agent's token creator on it and the Cloud Storage agent's grants. The stack's IAM
        wait includes them all, and the function waits for it."""
        self.trigger_email = ""
        """The Eventarc trigger's account (its email), "" for push."""
        self.bucket_check: provider.DataGoogleStorageBucket | None = None
        """For a bucket trigger: the bucket, read at plan (or apply) time, with postconditions that
        it is in the team's project and in `bucket_location`; None otherwise."""
        self.trigger_invoker: ProjectIamMember | None = None
        """run.invoker for the Eventarc trigger's account, None for push (`_eventarc_grants`)."""
        self.trigger_token_creator: ServiceAccountIamMember | None = None
        """The Pub/Sub service agent's token creator grant on the Eventarc trigger's account, None
        for push (the team's invoker has its own, `grant_push_token_creator`)."""
        if job.trigger == EVENTARC:
            self._eventarc_grants(props)
        else:
            self.grants.append(self._dead_letter_publisher("agent-dead-letter-publisher", self.service_agent))
        self.subscription: PubsubSubscription | None = None
        """The push subscription, once `subscribe` ran."""

    def _eventarc_grants(self, props: EventDeliveryProps) -> None:
        """The trigger's own account, which receives a bucket's events (eventReceiver exists only
        at project level), may invoke the function before it exists, and whose tokens the Pub/Sub
        service agent may sign (token creator on that account only); for a bucket, publisher for
        the Cloud Storage service agent, which publishes object events to Eventarc's transport."""
        job = props.job
        account = service_account(
            self,
            "trigger-account",
            props.project,
            naming.account_id(props.team, job.name, naming.TRIGGER_ROLE),
            f"runonce {props.team}/{job.name} Eventarc trigger",
            props.apis,
        )
        self.trigger_email = account.email
        if job.bucket:
            # Not for a Pub/Sub trigger: "If you are routing direct events from Cloud Pub/Sub, you
            # don't need to grant this role" (Eventarc, roles for Cloud Run functions targets).
            self.grants.append(
                self._project_grant(
                    "trigger-event-receiver", defaults.ROLE_EVENT_RECEIVER, self.trigger_email
                )
            )
        # Before the function: its trigger delivers as soon as it exists, and a delivery before the
        # grant is refused. The function's service does not exist yet, and Cloud Run does not
        # evaluate resource names in IAM conditions, so the grant is the project's, as in the
        # provider's cloudfunctions2_basic_gcs example; the stack waits for it before the function.
        self.trigger_invoker = self._project_grant(
            "trigger-invoker", defaults.ROLE_INVOKER, self.trigger_email
        )
        # The trigger's account signs the tokens of the pushes that deliver its events; in a project
        # whose Pub/Sub agent dates from on or before April 8, 2021 the agent needs token creator to
        # sign them (Eventarc, "Roles and permissions for Cloud Run functions targets"). On this
        # account only, as for the push invoker; in `grants`, so the function waits for it.
        self.trigger_token_creator = _agent_token_creator(
            self, "trigger-agent-token-creator", account, props.pubsub_agent, props.apis
        )
        self.grants.append(self.trigger_token_creator)
        if job.bucket:
            self.bucket_check = self._check_bucket()
            self.grants.append(
                ProjectIamMember(
                    self,
                    "storage-agent-publisher",
                    project=props.project,
                    role=defaults.ROLE_PUBLISHER,
                    member=props.storage_agent_member,
                )
            )

    def _check_bucket(self) -> provider.DataGoogleStorageBucket:
        """The bucket as Cloud Storage describes it, checked before its trigger is made: a trigger
        must be in its bucket's location, and the bucket in the trigger's project (the publisher
        grant is this project's Cloud Storage agent's). Synth cannot see a bucket; these
        postconditions stop the apply with the fix instead."""
        props, job = self.props, self.props.job
        location = job.bucket_location or props.region
        return provider.DataGoogleStorageBucket(
            self,
            "bucket",
            name=job.bucket,
            # Set, so the provider does not look the project up through the Compute API.
            project=props.project,
            depends_on=self.props.apis.of(defaults.API_STORAGE),
            lifecycle=TerraformResourceLifecycle(
                postcondition=[
                    Postcondition(
                        condition=f"${{tostring(self.project_number) == {self.props.project_data}.number}}",
                        error_message=f"Bucket {job.bucket} is not in project {props.project}: an Eventarc "
                        "trigger on a bucket needs the bucket in its own project. Use a bucket of "
                        "the team's project, or deploy the job with the bucket's project.",
                    ),
                    Postcondition(
                        condition=f'${{lower(self.location) == "{location}"}}',
                        error_message=f"Bucket {job.bucket} is not in {location}, where its trigger is: "
                        "set bucket_location to the bucket's location (lower case) in the team file.",
                    ),
                ]
            ),
        )

    def _topic(self, id: str, name: str) -> PubsubTopic:
        """A topic of the job's, labelled like the job."""
        job = self.props.job
        return PubsubTopic(
            self,
            id,
            project=self.props.project,
            name=name,
            labels=job.labels or None,
            depends_on=self.props.apis.of(defaults.API_PUBSUB),
        )

    def _dead_letter_publisher(self, id: str, principal: str) -> PubsubTopicIamMember:
        """Publisher for `principal` on the dead-letter topic only."""
        return PubsubTopicIamMember(
            self,
            id,
            project=self.props.project,
            topic=self.dead_letter_topic.name,
            role=defaults.ROLE_PUBLISHER,
            member=principal,
            depends_on=self.props.apis.of(defaults.API_PUBSUB),
        )

    def _project_grant(self, id: str, role: str, email: str) -> ProjectIamMember:
        """`role` at project level for the account `email`, for the grants no narrower resource
        takes (docs/stacks.md, "The Eventarc option")."""
        return ProjectIamMember(self, id, project=self.props.project, role=role, member=member(email))

    def event_trigger(self) -> Cloudfunctions2FunctionEventTrigger | None:
        """The function's Eventarc trigger (retried on failure), None for push: object finalize
        on the bucket, or the messages of the topic."""
        props, job = self.props, self.props.job
        if job.trigger != EVENTARC:
            return None
        if job.bucket:
            # "The trigger must be in the same location as the bucket" (cloudfunctions2_basic_gcs).
            return Cloudfunctions2FunctionEventTrigger(
                trigger_region=job.bucket_location or props.region,
                event_type=defaults.EVENT_STORAGE_FINALIZED,
                event_filters=[
                    Cloudfunctions2FunctionEventTriggerEventFilters(attribute="bucket", value=job.bucket)
                ],
                retry_policy=defaults.EVENTARC_RETRY,
                service_account_email=self.trigger_email,
            )
        return Cloudfunctions2FunctionEventTrigger(
            trigger_region=props.region,
            event_type=defaults.EVENT_PUBSUB,
            pubsub_topic=self.topic_id,
            retry_policy=defaults.EVENTARC_RETRY,
            service_account_email=self.trigger_email,
        )

    def grant_invoker(self, function: Invoked) -> CloudRunV2ServiceIamMember:
        """roles/run.invoker on this push job's function's service only, for the team's invoker
        (the push tokens' signer)."""
        props = self.props
        return grant_run_invoker(self, props.project, props.region, function, props.invoker_email, props.apis)

    def subscribe(self, function: Invoked, after: Sequence[ITerraformDependable]) -> PubsubSubscription:
        """The push subscription to `function`, created `after` its invoker grant has settled,
        and the service agent's subscriber grant on it."""
        props, job = self.props, self.props.job
        pubsub = self.props.apis.of(defaults.API_PUBSUB)
        self.subscription = PubsubSubscription(
            self,
            "push-subscription",
            project=props.project,
            name=naming.push_subscription_name(props.team, job.name),
            topic=self.topic_id,
            ack_deadline_seconds=job.ack_deadline_seconds,
            message_retention_duration=seconds(job.retry_window_seconds),
            retry_policy=PubsubSubscriptionRetryPolicy(
                minimum_backoff=seconds(job.retry.min_backoff_seconds),
                maximum_backoff=seconds(job.retry.max_backoff_seconds),
            ),
            expiration_policy=PubsubSubscriptionExpirationPolicy(ttl=""),
            dead_letter_policy=PubsubSubscriptionDeadLetterPolicy(
                dead_letter_topic=self.dead_letter_topic.id,
                max_delivery_attempts=job.max_delivery_attempts,
            ),
            push_config=PubsubSubscriptionPushConfig(
                push_endpoint=function.uri,
                oidc_token=PubsubSubscriptionPushConfigOidcToken(
                    service_account_email=self.props.invoker_email, audience=function.uri
                ),
            ),
            labels=job.labels or None,
            depends_on=[*pubsub, *self.grants, *after],
        )
        self.subscriber_grant = PubsubSubscriptionIamMember(
            self,
            "agent-subscriber",
            project=props.project,
            subscription=self.subscription.name,
            role=defaults.ROLE_SUBSCRIBER,
            member=self.service_agent,
            depends_on=pubsub,
        )
        """Subscriber on the push subscription for the service agent, which acknowledges a
        message once it has forwarded it to the dead-letter topic."""
        return self.subscription
