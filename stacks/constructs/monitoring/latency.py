"""Signal: how long deliveries take. Cloud Run's request latencies for functions and services;
App Engine's own response latencies (its `gae_app` resource, by module) for App Engine jobs
(docs/monitoring.md)."""

from __future__ import annotations

from collections.abc import Sequence

from stacks.constructs.monitoring.dashboard import Chart, series
from stacks.constructs.monitoring.filters import GAE_APP, RUN_REVISION


def chart(service_names: Sequence[str], app_engine_services: Sequence[str]) -> Chart:
    """The 99th percentile latency of each Cloud Run service (by `service_name` label) and App
    Engine service (by `module_id`)."""
    latencies = [
        ("run.googleapis.com/request_latencies", RUN_REVISION, "service_name", service)
        for service in service_names
    ] + [
        ("appengine.googleapis.com/http/server/response_latencies", GAE_APP, "module_id", module)
        for module in app_engine_services
    ]
    return (
        "Request latency (99th percentile, ms)",
        [
            series(
                f'metric.type="{metric}" AND resource.type="{resource}" AND resource.labels.{label}="{name}"',
                [f"resource.label.{label}"],
                aligner="ALIGN_PERCENTILE_99",
                reducer="REDUCE_MAX",
                plot="LINE",
            )
            for metric, resource, label, name in latencies
        ],
    )
