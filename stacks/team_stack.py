"""One team's stack: its own state, the ledger, the build storage, and a function plus a
Scheduler job per job. Team config -> constructs -> resources, in that order only."""

from __future__ import annotations

from pathlib import Path

from cdktf import Annotations, GcsBackend, LocalBackend, TerraformStack
from constructs import Construct

from stacks import defaults, naming
from stacks.archive import Archive
from stacks.build_storage import BuildStorage, BuildStorageProps
from stacks.dedup_store import DedupStore, DedupStoreProps
from stacks.deduplicated_function import (
    ARCHIVE_DIR,
    DeduplicatedFunction,
    DeduplicatedFunctionProps,
    job_archive,
)
from stacks.function_identity import FunctionIdentity, FunctionIdentityProps
from stacks.provider import DataGoogleProject, GoogleProvider, Sleep, TimeProvider
from stacks.required_apis import RequiredApis, RequiredApisProps
from stacks.scheduled_job import ScheduledJob, ScheduledJobProps
from stacks.state import local_state_file, missing_local_state
from stacks.team import REPO_ROOT, Team


class TeamStack(TerraformStack):
    """Everything one team file deploys, named after the team. Validate the team first
    (`stacks.validation.validate`): this class builds what it is given."""

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
        provider = GoogleProvider(self, "google", project=team.project, region=team.region)
        TimeProvider(self, "time")
        # As an override: cdktf would rewrite the label keys' hyphens to underscores.
        provider.add_override("default_labels", {**team.labels, "runonce-team": team.name})
        self.apis = RequiredApis(self, "apis", RequiredApisProps(project=team.project))
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
            ),
        )
        """The team's run ledger."""
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
        gcf_sources = naming.gcf_sources_bucket(self.project.number, team.region)
        # Every job's accounts and grants first, then one wait after all grants, then the
        # functions: a build started before its grants settle cannot fetch its source.
        identities = {
            job.name: FunctionIdentity(
                self,
                f"{job.name}-identity",
                FunctionIdentityProps(
                    team=team,
                    job=job,
                    store=self.store,
                    build=self.build,
                    apis=self.apis,
                    gcf_sources_bucket=gcf_sources,
                ),
            )
            for job in team.jobs
        }
        self.iam_settled = Sleep(
            self,
            "iam-settled",
            create_duration=defaults.IAM_SETTLE,
            # A time_sleep waits on create only; a changed trigger re-creates it, so a job added
            # later waits for its own grants too.
            triggers={"jobs": ",".join(sorted(identities))},
            depends_on=[grant for identity in identities.values() for grant in identity.grants],
        )
        """The `time_sleep` after every grant of every job; each function waits for it. It waits
        again whenever the set of jobs changes."""
        self.functions: dict[str, DeduplicatedFunction] = {}
        """Each job's function, by job name."""
        self.jobs: dict[str, ScheduledJob] = {}
        """Each job's Scheduler job, by job name."""
        archives: dict[str, Archive] = {}  # one per source folder: zipping and hashing cost time
        for job in team.jobs:
            if job.source not in archives:
                archives[job.source] = job_archive(job, archive_dir)
            function = DeduplicatedFunction(
                self,
                f"{job.name}-function",
                DeduplicatedFunctionProps(
                    team=team,
                    job=job,
                    build=self.build,
                    apis=self.apis,
                    identity=identities[job.name],
                    iam_settled=self.iam_settled,
                    archive=archives[job.source],
                ),
            )
            self.functions[job.name] = function
            self.jobs[job.name] = ScheduledJob(
                self,
                f"{job.name}-schedule",
                ScheduledJobProps(team=team, job=job, function=function, apis=self.apis),
            )
