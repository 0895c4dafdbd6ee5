"""The four grants a build account needs to build a gen2 function, and nothing more.

One place for them because two accounts hold them: the team's build account
(`team_identity`) and, for the one apply of migration step 1, each job's old build
account (`legacy_accounts`), whose grants must stay exactly as they were so that
Terraform sees no change to them.
"""

from __future__ import annotations

from constructs import Construct

from stacks import naming
from stacks.config import defaults
from stacks.constructs.build_storage import BuildStorage
from stacks.constructs.provider import (
    ArtifactRegistryRepositoryIamMember,
    ProjectIamMember,
    ProjectIamMemberCondition,
    StorageBucketIamMember,
)
from stacks.constructs.required_apis import RequiredApis
from stacks.toolchain import ITerraformDependable


def grant_build_access(
    scope: Construct,
    id_prefix: str,
    principal: str,
    project: str,
    build: BuildStorage,
    apis: RequiredApis,
    gcf_sources_bucket: str,
) -> list[ITerraformDependable]:
    """Read the team's source bucket and the region's `gcf-v2-sources-*` bucket (where the build
    fetches the source, provider issue 20571), push to the team's repository, write logs (log
    entries can only be written at project level); ids `<id_prefix>-source-reader`,
    `-gcf-source-reader`, `-image-writer` and `-log-writer`, in that order."""
    return [
        StorageBucketIamMember(
            scope,
            f"{id_prefix}-source-reader",
            bucket=build.bucket_name,
            role=defaults.ROLE_BUILD_SOURCE_READER,
            member=principal,
            depends_on=apis.of(defaults.API_STORAGE),
        ),
        ProjectIamMember(
            scope,
            f"{id_prefix}-gcf-source-reader",
            project=project,
            role=defaults.ROLE_BUILD_GCF_SOURCE_READER,
            member=principal,
            condition=ProjectIamMemberCondition(
                title="runonce-gcf-sources-only",
                description="Only the gcf-v2-sources bucket the build fetches the source from",
                expression=naming.one_bucket_condition(gcf_sources_bucket),
            ),
        ),
        ArtifactRegistryRepositoryIamMember(
            scope,
            f"{id_prefix}-image-writer",
            project=project,
            location=build.repository_location,
            repository=build.repository_name,
            role=defaults.ROLE_BUILD_IMAGE_WRITER,
            member=principal,
            depends_on=apis.of(defaults.API_ARTIFACT_REGISTRY),
        ),
        ProjectIamMember(
            scope,
            f"{id_prefix}-log-writer",
            project=project,
            role=defaults.ROLE_BUILD_LOG_WRITER,
            member=principal,
        ),
    ]
