"""One team's stack: its own state, the ledger, the build storage, and a function plus a
Scheduler job per job. Team config -> constructs -> resources, in that order only."""

from __future__ import annotations

from pathlib import Path

from cdktf import LocalBackend, TerraformStack
from constructs import Construct

from stacks.archive import Archive
from stacks.build_storage import BuildStorage, BuildStorageProps
from stacks.dedup_store import DedupStore, DedupStoreProps
from stacks.deduplicated_function import (
    ARCHIVE_DIR,
    DeduplicatedFunction,
    DeduplicatedFunctionProps,
    job_archive,
)
from stacks.provider import GoogleProvider
from stacks.required_apis import RequiredApis, RequiredApisProps
from stacks.scheduled_job import ScheduledJob, ScheduledJobProps
from stacks.team import Team


class TeamStack(TerraformStack):
    """Everything one team file deploys, named after the team. Validate the team first
    (`stacks.validation.validate`): this class builds what it is given."""

    def __init__(self, scope: Construct, team: Team, archive_dir: Path = ARCHIVE_DIR) -> None:
        super().__init__(scope, team.name)
        self.team = team
        """The team config this stack was built from."""
        # Relative to cdktf.out/stacks/<team>: the state file sits at the repository root, one
        # per team. Teams sharing a machine-independent state replace this with a GcsBackend.
        LocalBackend(self, path=f"../../../terraform.{team.name}.tfstate")
        provider = GoogleProvider(self, "google", project=team.project, region=team.region)
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
            BuildStorageProps(project=team.project, region=team.region, team=team.name, apis=self.apis),
        )
        """The team's source bucket and image repository."""
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
                    store=self.store,
                    build=self.build,
                    apis=self.apis,
                    archive=archives[job.source],
                ),
            )
            self.functions[job.name] = function
            self.jobs[job.name] = ScheduledJob(
                self,
                f"{job.name}-schedule",
                ScheduledJobProps(team=team, job=job, function=function, apis=self.apis),
            )
