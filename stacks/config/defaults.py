"""The secure, fixed choices every stack makes, in one place (the team config holds the rest).

Each constant says why it is what it is; constructs import them instead of repeating literals.
"""

from __future__ import annotations

# Scheduler (and Pub/Sub, Eventarc) in the same project can still call the function;
# nothing from the internet can, whatever IAM says.
INGRESS = "ALLOW_INTERNAL_ONLY"

# The build pushes the function's image here; a repository per team keeps the build's write
# permission on one repository instead of the project.
REPOSITORY_FORMAT = "DOCKER"

# roles the stacks grant, each to one resource (or conditioned to one database).
ROLE_LEDGER = "roles/datastore.user"
# The watchdog reads the team's ledger and writes nothing there: "Provides read access to Datastore
# resources" (https://cloud.google.com/iam/docs/roles-permissions/datastore), conditioned to the
# ledger's database like the runtime accounts' roles/datastore.user.
ROLE_LEDGER_READER = "roles/datastore.viewer"
# An operator's `runonce rerun` delivers through Scheduler's jobs.run: "Access to run jobs"
# (https://cloud.google.com/scheduler/docs/access-control). Scheduler's IAM is managed at project
# level only (that page), the provider has no job-level IAM resource, and IAM Conditions'
# resource attributes do not cover Cloud Scheduler
# (https://cloud.google.com/iam/docs/conditions-resource-attributes), so it is granted on the
# project: the operator may run any Scheduler job of the project.
ROLE_JOB_RUNNER = "roles/cloudscheduler.jobRunner"
PAUSER_PERMISSIONS = ("cloudscheduler.jobs.get", "cloudscheduler.jobs.pause")
"""What the watchdog needs to pause a job that keeps failing (`Job.pause_after_failures`):
`jobs.get` (is it paused, since when) and `jobs.pause`. No predefined role is narrower than
roles/cloudscheduler.admin, the only one holding `cloudscheduler.jobs.pause` (IAM roles reference,
"Cloud Scheduler roles and permissions": roles/cloudscheduler.jobRunner holds
`cloudscheduler.jobs.run` and `jobs.fullView` only), so a custom role of the project holds these
two; project-level, as every Scheduler grant (no IAM condition covers Scheduler jobs)."""
RESUMER_PERMISSIONS = ("cloudscheduler.jobs.get", "cloudscheduler.jobs.enable")
"""What an operator's `runonce resume` needs on a job the watchdog paused: `jobs.get` (is it
paused, since when) and `jobs.enable`, which `jobs.resume` requires ("Authorization requires the
following IAM permission on the specified resource name: cloudscheduler.jobs.enable", Scheduler
REST reference, projects.locations.jobs.resume). Among the predefined roles only
roles/cloudscheduler.admin holds `jobs.enable` (Scheduler's "Access control with IAM" page), so a
custom role of the project holds these two, granted only where the watchdog holds the pauser;
project-level, as every Scheduler grant."""
ROLE_SCHEDULER_VIEWER = "roles/cloudscheduler.viewer"
"""Get and list Scheduler jobs (`cloudscheduler.jobs.get`, which the job runner lacks): `runonce
backfill` reads the job's `userUpdateTime`; project-level, as every Scheduler role."""
ROLE_INVOKER = "roles/run.invoker"
ROLE_BUILD_SOURCE_READER = "roles/storage.objectViewer"
ROLE_BUILD_IMAGE_WRITER = "roles/artifactregistry.writer"
# Log entries can only be written at project level; the role writes and reads nothing else.
ROLE_BUILD_LOG_WRITER = "roles/logging.logWriter"
# A gen2 build run as its own account fetches the source from Google's
# gcf-v2-sources-PROJECT_NUMBER-REGION bucket (provider issue 20571: "You must grant Storage
# Object Viewer permission"); granted at project level, conditioned to that one bucket.
ROLE_BUILD_GCF_SOURCE_READER = "roles/storage.objectViewer"

# Pub/Sub push (event jobs): the service agent publishes dead letters and acknowledges the source
# message, the runtime account publishes its own dead letters (Pub/Sub "Dead-letter topics",
# https://cloud.google.com/pubsub/docs/dead-letter-topics, last step of its workflow).
ROLE_PUBLISHER = "roles/pubsub.publisher"
ROLE_SUBSCRIBER = "roles/pubsub.subscriber"
# Push authentication: in a project created on or before April 8, 2021 the Pub/Sub service agent
# needs this role to create the OIDC tokens of push requests (Cloud Run's "Use Pub/Sub with Cloud
# Run" tutorial; later projects' agents hold roles/pubsub.serviceAgent, with the same
# permissions). Granted on the one account the push subscriptions sign as, not on the project
# (docs/stacks.md, "Event jobs").
ROLE_TOKEN_CREATOR = "roles/iam.serviceAccountTokenCreator"
# An Eventarc trigger's account receives events (a role granted only at project level) and
# invokes its one function; a Cloud Storage trigger needs the Cloud Storage service agent to
# publish to Eventarc's Pub/Sub transport (the provider's cloudfunctions2_basic_gcs example
# grants the same roles, citing https://cloud.google.com/eventarc/docs/run/quickstart-storage).
ROLE_EVENT_RECEIVER = "roles/eventarc.eventReceiver"
EVENTARC_RETRY = "RETRY_POLICY_RETRY"
EVENT_PUBSUB = "google.cloud.pubsub.topic.v1.messagePublished"
EVENT_STORAGE_FINALIZED = "google.cloud.storage.object.v1.finalized"

# The dead letters' pull subscription keeps them the longest Pub/Sub allows: 7 days.
DEAD_LETTER_RETENTION = "604800s"

# Waits after eventually consistent changes, as time_sleep create durations. 60 s after the
# build grants is what the provider's "cloudfunctions2 basic builder" example waits; the same
# after API enablement (provider issues 10510, 8214, 16883: "wait a few minutes ... and retry").
# They run on create only: a later apply with nothing new to enable or grant does not wait.
API_SETTLE = "60s"
IAM_SETTLE = "60s"
# Before a Scheduler job or push subscription may call with its invoker's token, the invoker's
# run.invoker grant must be in effect, or the first calls are refused (403). IAM: changes to
# allow policies "typically propagate in 2 minutes, but could potentially take 7 minutes or
# longer" (https://cloud.google.com/iam/docs/access-change-propagation): wait the typical time;
# a call refused later than that is retried (Scheduler's retry_config, Pub/Sub's retry policy).
INVOKER_SETTLE = "120s"
INVOKER_SETTLE_SECONDS = 120

# An alert policy on a log-based metric created in the same apply is refused until Monitoring
# knows the metric: "Cannot find metric(s) ... If a metric was created recently, it could take up
# to 10 minutes to become available" (provider issue 11102, cloud-foundation-fabric PR 3739).
# The policies wait that long after their metrics, on create only (docs/monitoring.md).
METRIC_SETTLE = "600s"

# Source archives are named by digest, so every changed deploy deletes the previous object
# and the versioned bucket keeps it as a noncurrent version: delete those after this long
# (long enough to restore one by hand after a bad deploy).
NONCURRENT_SOURCE_DAYS = 30

# Artifact Registry cleanup: each deploy pushes a new image per function. Keep the newest
# versions of every image (the one serving included); delete any other older than this.
KEEP_IMAGE_VERSIONS = 5
DELETE_IMAGES_OLDER_THAN = "30d"

# Every API a team stack calls; enabled by the stack and left enabled on destroy (other
# workloads in the project may use them). Service Usage (which enables them) and Cloud
# Resource Manager (project IAM, the project number) must already be on: see docs/stacks.md.
API_IAM = "iam.googleapis.com"
API_FIRESTORE = "firestore.googleapis.com"
API_STORAGE = "storage.googleapis.com"
API_ARTIFACT_REGISTRY = "artifactregistry.googleapis.com"
API_CLOUD_BUILD = "cloudbuild.googleapis.com"
API_FUNCTIONS = "cloudfunctions.googleapis.com"
API_RUN = "run.googleapis.com"
API_SCHEDULER = "cloudscheduler.googleapis.com"
# Enabled only by teams with event jobs, so other teams' stacks do not change.
API_PUBSUB = "pubsub.googleapis.com"
# Enabled only by teams with an Eventarc event job.
API_EVENTARC = "eventarc.googleapis.com"
# Every team's log-based metrics (Cloud Logging) and its alerts, channels and dashboard
# (Cloud Monitoring): docs/monitoring.md.
API_LOGGING = "logging.googleapis.com"
API_MONITORING = "monitoring.googleapis.com"
REQUIRED_APIS = (
    API_IAM,
    API_FIRESTORE,
    API_STORAGE,
    API_ARTIFACT_REGISTRY,
    API_CLOUD_BUILD,
    API_FUNCTIONS,
    API_RUN,
    API_SCHEDULER,
    API_LOGGING,
    API_MONITORING,
)

# The label naming a function by the job it is named after (its first job; several jobs may
# share it, so it is not "runonce-job").
FUNCTION_LABEL = "runonce-function"

# The runonce function library, shipped inside every job's source archive as `runonce/`.
RUNONCE_PACKAGE = "runonce"
