"""The team's log-based metrics: counters over runonce's log lines, labelled by job and outcome,
never by run key or event id (one value per run would make a time series per run). A metric's
kind and value type cannot change once created and its labels can be added but not changed, so
both are fixed here, once."""

from __future__ import annotations

from collections.abc import Mapping

from constructs import Construct

from stacks.config import defaults
from stacks.constructs.monitoring.props import MonitoringProps
from stacks.constructs.provider import (
    LoggingMetric,
    LoggingMetricMetricDescriptor,
    LoggingMetricMetricDescriptorLabels,
)


def log_metric(
    scope: Construct,
    props: MonitoringProps,
    id: str,
    name: str,
    filter_: str,
    display: str,
    labels: Mapping[str, str],
) -> LoggingMetric:
    """A counter (DELTA, INT64) of the log entries matching the filter, with STRING labels
    extracted from the entries' JSON payload fields of the same names."""
    return LoggingMetric(
        scope,
        id,
        project=props.project,
        name=name,
        filter=filter_,
        description=f"{display} of team {props.team} (runonce docs/monitoring.md)",
        metric_descriptor=LoggingMetricMetricDescriptor(
            metric_kind="DELTA",
            value_type="INT64",
            unit="1",
            display_name=display,
            labels=[
                LoggingMetricMetricDescriptorLabels(key=key, value_type="STRING", description=text)
                for key, text in labels.items()
            ],
        ),
        label_extractors={key: f"EXTRACT(jsonPayload.{key})" for key in labels},
        depends_on=props.apis.of(defaults.API_LOGGING),
    )
