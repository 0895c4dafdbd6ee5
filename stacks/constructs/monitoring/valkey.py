"""Signal: a Valkey store's own health, where it threatens the guarantee (docs/stacks/stores.md,
"Monitoring"). Memory near the limit: with `noeviction` a full instance refuses writes, so claims
fail and runs wait. Evicted keys: any is a run record gone (eviction must be off). Replication lag:
a failover loses what the replica has not received, acknowledged claims included.

Metric types from Google's list ("Memorystore for Valkey supported monitoring metrics"), on the
monitored resource `memorystore.googleapis.com/Instance`; a failover itself is not alerted on:
no metric type for it was found in that list (the functions' `store_unavailable` alert fires
while the primary cannot be reached).
"""

from __future__ import annotations

from stacks.constructs.monitoring.alerts import Alerting, threshold
from stacks.constructs.monitoring.dashboard import Chart, series
from stacks.constructs.monitoring.filters import ALIGNMENT

INSTANCE = "memorystore.googleapis.com/Instance"
"""The monitored resource of a Memorystore for Valkey instance's metrics, by `instance_id`."""
MEMORY = "memorystore.googleapis.com/instance/memory/maximum_utilization"
"""The fullest node's memory use, 0.0 to 1.0."""
EVICTED = "memorystore.googleapis.com/instance/stats/average_evicted_keys"
"""Keys evicted for memory, averaged over the primaries."""
REPLICATION_LAG = "memorystore.googleapis.com/instance/replication/maximum_offset_diff"
"""The largest replication offset difference of a node, in bytes (Memorystore for Valkey,
"Troubleshoot issues": alert above 64 MB, or 1 GB for highmem-xlarge nodes)."""
MEMORY_ABOVE = 0.8
"""Warn at 80 % of the fullest node's memory: room to scale before writes are refused."""
LAG_ABOVE = {"HIGHMEM_XLARGE": 1 << 30}
"""The replication lag alert's threshold by node type; 64 MB for the others."""
DEFAULT_LAG_ABOVE = 64 << 20


def instance_filter(metric: str, instance: str) -> str:
    """A Monitoring filter for one metric of one instance."""
    return (
        f'metric.type="{metric}" AND resource.type="{INSTANCE}" AND resource.labels.instance_id="{instance}"'
    )


def alert_store(alerting: Alerting, instance: str, node_type: str) -> None:
    """The store's three alerts."""
    team = alerting.props.team
    describe = f"`gcloud memorystore instances describe {instance} --location=REGION`"
    alerting.policy(
        "store-memory",
        f"Valkey store {instance} above {MEMORY_ABOVE:.0%} of its memory",
        "WARNING",
        [
            threshold(
                instance_filter(MEMORY, instance), "memory use", "300s", MEMORY_ABOVE, "ALIGN_MAX", ALIGNMENT
            )
        ],
        f"The instance keeping team {team}'s runs is close to full. It does not evict, so when full it "
        f"refuses writes: claims fail (`store_unavailable`) and runs wait for retries.\n\n"
        f"1. See which runs wait on it: `runonce runs --team {team} --status in_progress`; its size "
        f"and node type: {describe}.\n"
        f"2. Move to a larger node type (`Valkey(node_type=...)` in the team file), or shorten the jobs' "
        f"`retention_seconds`.",
    )
    alerting.policy(
        "store-evicted",
        f"Valkey store {instance} evicted keys",
        "CRITICAL",
        [threshold(instance_filter(EVICTED, instance), "evicted keys", "0s", 0, "ALIGN_MAX", ALIGNMENT)],
        f"The instance keeping team {team}'s runs evicted keys: each may be a run record, and a run "
        f"whose record is gone runs again.\n\n"
        f"1. Read its maxmemory-policy: {describe} (engineConfigs); list the runs since: "
        f"`runonce runs --team {team}`.\n"
        f"2. Set it back: `gcloud memorystore instances update {instance} --location=REGION "
        f"--engine-configs=maxmemory-policy=noeviction`.",
    )
    lag = LAG_ABOVE.get(node_type, DEFAULT_LAG_ABOVE)
    alerting.policy(
        "store-replication-lag",
        f"Valkey store {instance} replicas behind by over {lag >> 20} MB",
        "WARNING",
        [
            threshold(
                instance_filter(REPLICATION_LAG, instance),
                "replication lag",
                "300s",
                lag,
                "ALIGN_MAX",
                ALIGNMENT,
            )
        ],
        f"A replica of the instance keeping team {team}'s runs is behind: a failover now would lose "
        f"the writes it has not received, claims and completions the functions were told had landed.\n\n"
        f"1. See the write load: `runonce runs --team {team}`.\n"
        f"2. Scale the instance up (`Valkey(node_type=...)`) if the lag persists.",
    )


def chart(instance: str) -> Chart:
    """The instance's memory use and replication lag."""
    return (
        f"Valkey store {instance}: memory use and replication lag",
        [
            series(
                instance_filter(metric, instance),
                ["resource.label.instance_id"],
                "ALIGN_MAX",
                "REDUCE_MAX",
                "LINE",
            )
            for metric in (MEMORY, REPLICATION_LAG)
        ],
    )
