"""The prebuilt google (and time) provider bindings the stacks use, loaded one submodule at a time.

They come from the toolchain `stacks.toolchain` chose: CDKTF's `cdktf_cdktf_provider_google` or
CDK Terrain's `cdktn_provider_google` (both bind google provider 6.50.0 with the same submodules
and classes), so the classes are listed here by submodule (`LOADED_NOW`, `AT_FIRST_USE`) and
imported from the chosen package; the `TYPE_CHECKING` imports give mypy CDKTF's signatures.

`import cdktf_cdktf_provider_google.storage_bucket` normally runs the package `__init__`, which
imports all 1,474 resource submodules (most of a synth's time). Each submodule only needs the
package's `_jsii` assembly loader, not its siblings, so this module registers a bare package
object whose `__path__` is the real package folder before importing anything from it: Python
then finds the submodules on disk and never runs the package `__init__`. If the real package
was already imported (a plain cdktf app in the same process), that package is used as is.
The time provider's bindings (for `time_sleep` and `time_static`) are small, but are loaded the same way.

The bindings only some teams' stacks use (a bucket trigger's, a Cloud Run job target's, an
existing notification channel's, a Valkey store's and its network's) are
loaded when first named (`AT_FIRST_USE`): each submodule costs its import (tens of ms, or more
where Python must compile it), and the constructs that need one reach it as `provider.<Class>`
where they build it.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
import types
from typing import TYPE_CHECKING, Any

from stacks.toolchain import TOOLCHAIN, TOOLCHAIN_ENV

PACKAGE = TOOLCHAIN.google
TIME_PACKAGE = TOOLCHAIN.time


def _register_bare_package(name: str) -> None:
    """Put a package module without its `__init__` into sys.modules (once)."""
    if name in sys.modules:
        return
    spec = importlib.util.find_spec(name)
    if spec is None or not spec.submodule_search_locations:
        raise ImportError(
            f"{name} is not installed in this Python ({TOOLCHAIN_ENV}={TOOLCHAIN.name}): "
            f"run `{TOOLCHAIN.install}`"
        )
    package = types.ModuleType(name, "provider bindings (submodules load on demand)")
    package.__path__ = list(spec.submodule_search_locations)
    package.__file__ = spec.origin
    package.__spec__ = spec
    sys.modules[name] = package


_register_bare_package(PACKAGE)
_register_bare_package(TIME_PACKAGE)

LOADED_NOW = {
    f"{PACKAGE}.artifact_registry_repository": (
        "ArtifactRegistryRepository",
        "ArtifactRegistryRepositoryCleanupPolicies",
        "ArtifactRegistryRepositoryCleanupPoliciesCondition",
        "ArtifactRegistryRepositoryCleanupPoliciesMostRecentVersions",
    ),
    f"{PACKAGE}.artifact_registry_repository_iam_member": ("ArtifactRegistryRepositoryIamMember",),
    f"{PACKAGE}.cloud_run_v2_service_iam_member": ("CloudRunV2ServiceIamMember",),
    f"{PACKAGE}.cloud_scheduler_job": (
        "CloudSchedulerJob",
        "CloudSchedulerJobAppEngineHttpTarget",
        "CloudSchedulerJobAppEngineHttpTargetAppEngineRouting",
        "CloudSchedulerJobHttpTarget",
        "CloudSchedulerJobHttpTargetOidcToken",
        "CloudSchedulerJobRetryConfig",
    ),
    f"{PACKAGE}.cloudfunctions2_function": (
        "Cloudfunctions2Function",
        "Cloudfunctions2FunctionBuildConfig",
        "Cloudfunctions2FunctionBuildConfigSource",
        "Cloudfunctions2FunctionBuildConfigSourceStorageSource",
        "Cloudfunctions2FunctionEventTrigger",
        "Cloudfunctions2FunctionEventTriggerEventFilters",
        "Cloudfunctions2FunctionServiceConfig",
    ),
    f"{PACKAGE}.data_google_project": ("DataGoogleProject",),
    f"{PACKAGE}.firestore_database": ("FirestoreDatabase",),
    f"{PACKAGE}.firestore_field": (
        "FirestoreField",
        "FirestoreFieldIndexConfig",
        "FirestoreFieldTtlConfig",
    ),
    f"{PACKAGE}.firestore_index": (
        "FirestoreIndex",
        "FirestoreIndexFields",
    ),
    f"{PACKAGE}.logging_metric": (
        "LoggingMetric",
        "LoggingMetricMetricDescriptor",
        "LoggingMetricMetricDescriptorLabels",
    ),
    f"{PACKAGE}.monitoring_alert_policy": (
        "MonitoringAlertPolicy",
        "MonitoringAlertPolicyAlertStrategy",
        "MonitoringAlertPolicyAlertStrategyNotificationRateLimit",
        "MonitoringAlertPolicyConditions",
        "MonitoringAlertPolicyConditionsConditionMatchedLog",
        "MonitoringAlertPolicyConditionsConditionThreshold",
        "MonitoringAlertPolicyConditionsConditionThresholdAggregations",
        "MonitoringAlertPolicyDocumentation",
    ),
    f"{PACKAGE}.monitoring_dashboard": ("MonitoringDashboard",),
    f"{PACKAGE}.monitoring_notification_channel": ("MonitoringNotificationChannel",),
    f"{PACKAGE}.project_iam_custom_role": ("ProjectIamCustomRole",),
    f"{PACKAGE}.project_iam_member": (
        "ProjectIamMember",
        "ProjectIamMemberCondition",
    ),
    f"{PACKAGE}.project_service": ("ProjectService",),
    f"{PACKAGE}.provider": ("GoogleProvider",),
    f"{PACKAGE}.pubsub_subscription": (
        "PubsubSubscription",
        "PubsubSubscriptionDeadLetterPolicy",
        "PubsubSubscriptionExpirationPolicy",
        "PubsubSubscriptionPushConfig",
        "PubsubSubscriptionPushConfigOidcToken",
        "PubsubSubscriptionRetryPolicy",
    ),
    f"{PACKAGE}.pubsub_subscription_iam_member": ("PubsubSubscriptionIamMember",),
    f"{PACKAGE}.pubsub_topic": ("PubsubTopic",),
    f"{PACKAGE}.pubsub_topic_iam_member": ("PubsubTopicIamMember",),
    f"{PACKAGE}.service_account": ("ServiceAccount",),
    f"{PACKAGE}.service_account_iam_member": ("ServiceAccountIamMember",),
    f"{PACKAGE}.storage_bucket": (
        "StorageBucket",
        "StorageBucketLifecycleRule",
        "StorageBucketLifecycleRuleAction",
        "StorageBucketLifecycleRuleCondition",
        "StorageBucketVersioning",
    ),
    f"{PACKAGE}.storage_bucket_iam_member": ("StorageBucketIamMember",),
    f"{PACKAGE}.storage_bucket_object": ("StorageBucketObject",),
    f"{TIME_PACKAGE}.provider": ("TimeProvider",),
    f"{TIME_PACKAGE}.sleep": ("Sleep",),
    f"{TIME_PACKAGE}.static_resource": ("StaticResource",),
}
"""The classes every stack uses, imported with this module, by submodule."""

for _module, _names in LOADED_NOW.items():
    _loaded = importlib.import_module(_module)
    globals().update({name: getattr(_loaded, name) for name in _names})

_RUN_SERVICE = f"{PACKAGE}.cloud_run_v2_service"
_MEMORYSTORE = f"{PACKAGE}.memorystore_instance"
_CONNECTION_POLICY = f"{PACKAGE}.network_connectivity_service_connection_policy"
AT_FIRST_USE = {
    "CloudRunV2JobIamMember": f"{PACKAGE}.cloud_run_v2_job_iam_member",
    "CloudRunV2Service": _RUN_SERVICE,
    "CloudRunV2ServiceTemplate": _RUN_SERVICE,
    "CloudRunV2ServiceTemplateContainers": _RUN_SERVICE,
    "CloudRunV2ServiceTemplateContainersEnv": _RUN_SERVICE,
    "CloudRunV2ServiceTemplateContainersResources": _RUN_SERVICE,
    "CloudRunV2ServiceTemplateScaling": _RUN_SERVICE,
    "CloudRunV2ServiceTemplateVpcAccess": _RUN_SERVICE,
    "CloudRunV2ServiceTemplateVpcAccessNetworkInterfaces": _RUN_SERVICE,
    "ComputeFirewall": f"{PACKAGE}.compute_firewall",
    "ComputeFirewallAllow": f"{PACKAGE}.compute_firewall",
    "ComputeNetwork": f"{PACKAGE}.compute_network",
    "ComputeSubnetwork": f"{PACKAGE}.compute_subnetwork",
    "ComputeSubnetworkLogConfig": f"{PACKAGE}.compute_subnetwork",
    "DataGoogleCloudRunV2Service": f"{PACKAGE}.data_google_cloud_run_v2_service",
    "DataGoogleComputeNetwork": f"{PACKAGE}.data_google_compute_network",
    "DataGoogleComputeSubnetwork": f"{PACKAGE}.data_google_compute_subnetwork",
    "DataGoogleMemorystoreInstance": f"{PACKAGE}.data_google_memorystore_instance",
    "DataGoogleMonitoringNotificationChannel": f"{PACKAGE}.data_google_monitoring_notification_channel",
    "DataGoogleServiceAccount": f"{PACKAGE}.data_google_service_account",
    "DataGoogleServiceAccounts": f"{PACKAGE}.data_google_service_accounts",
    "DataGoogleStorageBucket": f"{PACKAGE}.data_google_storage_bucket",
    "DataGoogleStorageProjectServiceAccount": f"{PACKAGE}.data_google_storage_project_service_account",
    "MemorystoreInstance": _MEMORYSTORE,
    "MemorystoreInstanceDesiredAutoCreatedEndpoints": _MEMORYSTORE,
    "MemorystoreInstancePersistenceConfig": _MEMORYSTORE,
    "MemorystoreInstancePersistenceConfigAofConfig": _MEMORYSTORE,
    "MemorystoreInstanceZoneDistributionConfig": _MEMORYSTORE,
    "NetworkConnectivityServiceConnectionPolicy": _CONNECTION_POLICY,
    "NetworkConnectivityServiceConnectionPolicyPscConfig": _CONNECTION_POLICY,
    "VpcAccessConnector": f"{PACKAGE}.vpc_access_connector",
}
"""The classes of the submodules imported when the class is first named, by class name."""

if TYPE_CHECKING:
    from cdktf_cdktf_provider_google.artifact_registry_repository import (
        ArtifactRegistryRepository,
        ArtifactRegistryRepositoryCleanupPolicies,
        ArtifactRegistryRepositoryCleanupPoliciesCondition,
        ArtifactRegistryRepositoryCleanupPoliciesMostRecentVersions,
    )
    from cdktf_cdktf_provider_google.artifact_registry_repository_iam_member import (
        ArtifactRegistryRepositoryIamMember,
    )
    from cdktf_cdktf_provider_google.cloud_run_v2_job_iam_member import CloudRunV2JobIamMember
    from cdktf_cdktf_provider_google.cloud_run_v2_service import (
        CloudRunV2Service,
        CloudRunV2ServiceTemplate,
        CloudRunV2ServiceTemplateContainers,
        CloudRunV2ServiceTemplateContainersEnv,
        CloudRunV2ServiceTemplateContainersResources,
        CloudRunV2ServiceTemplateScaling,
        CloudRunV2ServiceTemplateVpcAccess,
        CloudRunV2ServiceTemplateVpcAccessNetworkInterfaces,
    )
    from cdktf_cdktf_provider_google.cloud_run_v2_service_iam_member import (
        CloudRunV2ServiceIamMember,
    )
    from cdktf_cdktf_provider_google.cloud_scheduler_job import (
        CloudSchedulerJob,
        CloudSchedulerJobAppEngineHttpTarget,
        CloudSchedulerJobAppEngineHttpTargetAppEngineRouting,
        CloudSchedulerJobHttpTarget,
        CloudSchedulerJobHttpTargetOidcToken,
        CloudSchedulerJobRetryConfig,
    )
    from cdktf_cdktf_provider_google.cloudfunctions2_function import (
        Cloudfunctions2Function,
        Cloudfunctions2FunctionBuildConfig,
        Cloudfunctions2FunctionBuildConfigSource,
        Cloudfunctions2FunctionBuildConfigSourceStorageSource,
        Cloudfunctions2FunctionEventTrigger,
        Cloudfunctions2FunctionEventTriggerEventFilters,
        Cloudfunctions2FunctionServiceConfig,
    )
    from cdktf_cdktf_provider_google.compute_firewall import ComputeFirewall, ComputeFirewallAllow
    from cdktf_cdktf_provider_google.compute_network import ComputeNetwork
    from cdktf_cdktf_provider_google.compute_subnetwork import ComputeSubnetwork, ComputeSubnetworkLogConfig
    from cdktf_cdktf_provider_google.data_google_cloud_run_v2_service import DataGoogleCloudRunV2Service
    from cdktf_cdktf_provider_google.data_google_compute_network import DataGoogleComputeNetwork
    from cdktf_cdktf_provider_google.data_google_compute_subnetwork import DataGoogleComputeSubnetwork
    from cdktf_cdktf_provider_google.data_google_memorystore_instance import DataGoogleMemorystoreInstance
    from cdktf_cdktf_provider_google.data_google_monitoring_notification_channel import (
        DataGoogleMonitoringNotificationChannel,
    )
    from cdktf_cdktf_provider_google.data_google_project import DataGoogleProject
    from cdktf_cdktf_provider_google.data_google_service_account import DataGoogleServiceAccount
    from cdktf_cdktf_provider_google.data_google_service_accounts import DataGoogleServiceAccounts
    from cdktf_cdktf_provider_google.data_google_storage_bucket import DataGoogleStorageBucket
    from cdktf_cdktf_provider_google.data_google_storage_project_service_account import (
        DataGoogleStorageProjectServiceAccount,
    )
    from cdktf_cdktf_provider_google.firestore_database import FirestoreDatabase
    from cdktf_cdktf_provider_google.firestore_field import (
        FirestoreField,
        FirestoreFieldIndexConfig,
        FirestoreFieldTtlConfig,
    )
    from cdktf_cdktf_provider_google.firestore_index import FirestoreIndex, FirestoreIndexFields
    from cdktf_cdktf_provider_google.logging_metric import (
        LoggingMetric,
        LoggingMetricMetricDescriptor,
        LoggingMetricMetricDescriptorLabels,
    )
    from cdktf_cdktf_provider_google.memorystore_instance import (
        MemorystoreInstance,
        MemorystoreInstanceDesiredAutoCreatedEndpoints,
        MemorystoreInstancePersistenceConfig,
        MemorystoreInstancePersistenceConfigAofConfig,
        MemorystoreInstanceZoneDistributionConfig,
    )
    from cdktf_cdktf_provider_google.monitoring_alert_policy import (
        MonitoringAlertPolicy,
        MonitoringAlertPolicyAlertStrategy,
        MonitoringAlertPolicyAlertStrategyNotificationRateLimit,
        MonitoringAlertPolicyConditions,
        MonitoringAlertPolicyConditionsConditionMatchedLog,
        MonitoringAlertPolicyConditionsConditionThreshold,
        MonitoringAlertPolicyConditionsConditionThresholdAggregations,
        MonitoringAlertPolicyDocumentation,
    )
    from cdktf_cdktf_provider_google.monitoring_dashboard import MonitoringDashboard
    from cdktf_cdktf_provider_google.monitoring_notification_channel import (
        MonitoringNotificationChannel,
    )
    from cdktf_cdktf_provider_google.network_connectivity_service_connection_policy import (
        NetworkConnectivityServiceConnectionPolicy,
        NetworkConnectivityServiceConnectionPolicyPscConfig,
    )
    from cdktf_cdktf_provider_google.project_iam_custom_role import ProjectIamCustomRole
    from cdktf_cdktf_provider_google.project_iam_member import (
        ProjectIamMember,
        ProjectIamMemberCondition,
    )
    from cdktf_cdktf_provider_google.project_service import ProjectService
    from cdktf_cdktf_provider_google.provider import GoogleProvider
    from cdktf_cdktf_provider_google.pubsub_subscription import (
        PubsubSubscription,
        PubsubSubscriptionDeadLetterPolicy,
        PubsubSubscriptionExpirationPolicy,
        PubsubSubscriptionPushConfig,
        PubsubSubscriptionPushConfigOidcToken,
        PubsubSubscriptionRetryPolicy,
    )
    from cdktf_cdktf_provider_google.pubsub_subscription_iam_member import (
        PubsubSubscriptionIamMember,
    )
    from cdktf_cdktf_provider_google.pubsub_topic import PubsubTopic
    from cdktf_cdktf_provider_google.pubsub_topic_iam_member import PubsubTopicIamMember
    from cdktf_cdktf_provider_google.service_account import ServiceAccount
    from cdktf_cdktf_provider_google.service_account_iam_member import ServiceAccountIamMember
    from cdktf_cdktf_provider_google.storage_bucket import (
        StorageBucket,
        StorageBucketLifecycleRule,
        StorageBucketLifecycleRuleAction,
        StorageBucketLifecycleRuleCondition,
        StorageBucketVersioning,
    )
    from cdktf_cdktf_provider_google.storage_bucket_iam_member import StorageBucketIamMember
    from cdktf_cdktf_provider_google.storage_bucket_object import StorageBucketObject
    from cdktf_cdktf_provider_google.vpc_access_connector import VpcAccessConnector
    from cdktf_cdktf_provider_time.provider import TimeProvider
    from cdktf_cdktf_provider_time.sleep import Sleep
    from cdktf_cdktf_provider_time.static_resource import StaticResource


def __getattr__(name: str) -> Any:
    """A class of `AT_FIRST_USE`, its submodule imported now (once: it is then a global here)."""
    if name not in AT_FIRST_USE:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(AT_FIRST_USE[name]), name)
    globals()[name] = value
    return value


__all__ = [
    "ArtifactRegistryRepository",
    "ArtifactRegistryRepositoryCleanupPolicies",
    "ArtifactRegistryRepositoryCleanupPoliciesCondition",
    "ArtifactRegistryRepositoryCleanupPoliciesMostRecentVersions",
    "ArtifactRegistryRepositoryIamMember",
    "CloudRunV2JobIamMember",
    "CloudRunV2Service",
    "CloudRunV2ServiceIamMember",
    "CloudRunV2ServiceTemplate",
    "CloudRunV2ServiceTemplateContainers",
    "CloudRunV2ServiceTemplateContainersEnv",
    "CloudRunV2ServiceTemplateContainersResources",
    "CloudRunV2ServiceTemplateScaling",
    "CloudRunV2ServiceTemplateVpcAccess",
    "CloudRunV2ServiceTemplateVpcAccessNetworkInterfaces",
    "CloudSchedulerJob",
    "CloudSchedulerJobAppEngineHttpTarget",
    "CloudSchedulerJobAppEngineHttpTargetAppEngineRouting",
    "CloudSchedulerJobHttpTarget",
    "CloudSchedulerJobHttpTargetOidcToken",
    "CloudSchedulerJobRetryConfig",
    "Cloudfunctions2Function",
    "Cloudfunctions2FunctionBuildConfig",
    "Cloudfunctions2FunctionBuildConfigSource",
    "Cloudfunctions2FunctionBuildConfigSourceStorageSource",
    "Cloudfunctions2FunctionEventTrigger",
    "Cloudfunctions2FunctionEventTriggerEventFilters",
    "Cloudfunctions2FunctionServiceConfig",
    "ComputeFirewall",
    "ComputeFirewallAllow",
    "ComputeNetwork",
    "ComputeSubnetwork",
    "ComputeSubnetworkLogConfig",
    "DataGoogleCloudRunV2Service",
    "DataGoogleComputeNetwork",
    "DataGoogleComputeSubnetwork",
    "DataGoogleMemorystoreInstance",
    "DataGoogleMonitoringNotificationChannel",
    "DataGoogleProject",
    "DataGoogleServiceAccount",
    "DataGoogleServiceAccounts",
    "DataGoogleStorageBucket",
    "DataGoogleStorageProjectServiceAccount",
    "FirestoreDatabase",
    "FirestoreField",
    "FirestoreFieldIndexConfig",
    "FirestoreFieldTtlConfig",
    "FirestoreIndex",
    "FirestoreIndexFields",
    "GoogleProvider",
    "LoggingMetric",
    "LoggingMetricMetricDescriptor",
    "LoggingMetricMetricDescriptorLabels",
    "MemorystoreInstance",
    "MemorystoreInstanceDesiredAutoCreatedEndpoints",
    "MemorystoreInstancePersistenceConfig",
    "MemorystoreInstancePersistenceConfigAofConfig",
    "MemorystoreInstanceZoneDistributionConfig",
    "MonitoringAlertPolicy",
    "MonitoringAlertPolicyAlertStrategy",
    "MonitoringAlertPolicyAlertStrategyNotificationRateLimit",
    "MonitoringAlertPolicyConditions",
    "MonitoringAlertPolicyConditionsConditionMatchedLog",
    "MonitoringAlertPolicyConditionsConditionThreshold",
    "MonitoringAlertPolicyConditionsConditionThresholdAggregations",
    "MonitoringAlertPolicyDocumentation",
    "MonitoringDashboard",
    "MonitoringNotificationChannel",
    "NetworkConnectivityServiceConnectionPolicy",
    "NetworkConnectivityServiceConnectionPolicyPscConfig",
    "ProjectIamCustomRole",
    "ProjectIamMember",
    "ProjectIamMemberCondition",
    "ProjectService",
    "PubsubSubscription",
    "PubsubSubscriptionDeadLetterPolicy",
    "PubsubSubscriptionExpirationPolicy",
    "PubsubSubscriptionIamMember",
    "PubsubSubscriptionPushConfig",
    "PubsubSubscriptionPushConfigOidcToken",
    "PubsubSubscriptionRetryPolicy",
    "PubsubTopic",
    "PubsubTopicIamMember",
    "ServiceAccount",
    "ServiceAccountIamMember",
    "Sleep",
    "StaticResource",
    "StorageBucket",
    "StorageBucketIamMember",
    "StorageBucketLifecycleRule",
    "StorageBucketLifecycleRuleAction",
    "StorageBucketLifecycleRuleCondition",
    "StorageBucketObject",
    "StorageBucketVersioning",
    "TimeProvider",
    "VpcAccessConnector",
]
