"""Where a team's function builds read their source and write their images."""

from __future__ import annotations

from dataclasses import dataclass

from constructs import Construct

from stacks import naming
from stacks.config import defaults
from stacks.constructs.archive import Archive
from stacks.constructs.provider import (
    ArtifactRegistryRepository,
    ArtifactRegistryRepositoryCleanupPolicies,
    ArtifactRegistryRepositoryCleanupPoliciesCondition,
    ArtifactRegistryRepositoryCleanupPoliciesMostRecentVersions,
    StorageBucket,
    StorageBucketLifecycleRule,
    StorageBucketLifecycleRuleAction,
    StorageBucketLifecycleRuleCondition,
    StorageBucketObject,
    StorageBucketVersioning,
)
from stacks.constructs.required_apis import RequiredApis
from stacks.toolchain import AssetType, TerraformAsset


@dataclass(frozen=True)
class BuildStorageProps:
    """The team whose builds this storage serves."""

    project: str
    """Project id."""
    region: str
    """Region of the bucket and the repository (the functions' region)."""
    team: str
    """Team name; names the bucket and the repository."""
    apis: RequiredApis
    """The stack's enabled APIs."""
    force_destroy: bool = False
    """Let `destroy` delete the bucket with every archive and version in it (sandbox teams).
    Off by default: destroy then stops at a non-empty bucket."""


class BuildStorage(Construct):
    """A private source bucket and a Docker repository for the team's function builds.

    The bucket has uniform bucket-level access (no object ACLs) and enforced public access
    prevention, and is versioned. Archive names are content digests, so every changed deploy
    replaces the object and leaves the previous archive as a noncurrent version: a lifecycle
    rule deletes those after `defaults.NONCURRENT_SOURCE_DAYS`. The repository keeps the newest
    `defaults.KEEP_IMAGE_VERSIONS` versions of each image and deletes older ones.
    """

    def __init__(self, scope: Construct, id: str, props: BuildStorageProps) -> None:
        super().__init__(scope, id)
        self.bucket = StorageBucket(
            self,
            "bucket",
            project=props.project,
            name=naming.bucket_name(props.project, props.team),
            location=props.region,
            uniform_bucket_level_access=True,
            public_access_prevention="enforced",
            versioning=StorageBucketVersioning(enabled=True),
            # As the provider's storage_bucket docs show it: without send_age_if_zero = false
            # the provider adds age = 0, which would match live objects too.
            lifecycle_rule=[
                StorageBucketLifecycleRule(
                    action=StorageBucketLifecycleRuleAction(type="Delete"),
                    condition=StorageBucketLifecycleRuleCondition(
                        days_since_noncurrent_time=defaults.NONCURRENT_SOURCE_DAYS, send_age_if_zero=False
                    ),
                )
            ],
            force_destroy=props.force_destroy,
            depends_on=props.apis.of(defaults.API_STORAGE),
        )
        """The `google_storage_bucket` holding the source archives."""
        self.repository = ArtifactRegistryRepository(
            self,
            "repository",
            project=props.project,
            location=props.region,
            repository_id=naming.repository_id(props.team),
            format=defaults.REPOSITORY_FORMAT,
            description=f"Function images built for team {props.team} (runonce)",
            # Shaped as the provider's "artifact registry repository cleanup" example. A version
            # matching both a KEEP and a DELETE policy is kept, so the newest images survive.
            cleanup_policy_dry_run=False,
            cleanup_policies=[
                ArtifactRegistryRepositoryCleanupPolicies(
                    id="delete-old-images",
                    action="DELETE",
                    condition=ArtifactRegistryRepositoryCleanupPoliciesCondition(
                        tag_state="ANY", older_than=defaults.DELETE_IMAGES_OLDER_THAN
                    ),
                ),
                ArtifactRegistryRepositoryCleanupPolicies(
                    id="keep-recent-images",
                    action="KEEP",
                    most_recent_versions=ArtifactRegistryRepositoryCleanupPoliciesMostRecentVersions(
                        keep_count=defaults.KEEP_IMAGE_VERSIONS
                    ),
                ),
            ],
            depends_on=props.apis.of(defaults.API_ARTIFACT_REGISTRY),
        )
        """The `google_artifact_registry_repository` the builds push images to."""
        # Attribute reads are round trips to the jsii runtime; every job uses these, so read once.
        self.bucket_name: str = self.bucket.name
        """The bucket's name (a Terraform reference)."""
        self.repository_name: str = self.repository.name
        """The repository's full name (a Terraform reference)."""
        self.repository_id: str = self.repository.id
        """The repository's id, as a function's docker_repository takes it (a Terraform reference)."""
        self.repository_location: str = self.repository.location
        """The repository's location (a Terraform reference)."""
        self._uploads: dict[str, StorageBucketObject] = {}
        self._storage_api = props.apis.of(defaults.API_STORAGE)

    def upload(self, archive: Archive, source: str) -> StorageBucketObject:
        """The bucket object holding the archive of one source folder: one per folder, shared by
        every job built from it. Its name is the digest (a change is a new object); its construct
        id is the folder's, so the Terraform address stays put across code changes."""
        if archive.digest not in self._uploads:
            asset = TerraformAsset(
                self,
                f"{source}-archive",
                path=str(archive.path),
                type=AssetType.FILE,
                asset_hash=archive.digest,
            )
            self._uploads[archive.digest] = StorageBucketObject(
                self,
                f"{source}-source",
                bucket=self.bucket_name,
                name=naming.source_object_name(archive.digest),
                source=asset.path,
                depends_on=self._storage_api,
            )
        return self._uploads[archive.digest]
