"""The shape every alert policy of a team shares: its title, severity, channels, documentation
(the `runonce` command to run) and the APIs it waits for; the signal modules give the conditions."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from constructs import Construct

from stacks.config import defaults
from stacks.constructs.monitoring.props import MonitoringProps
from stacks.constructs.provider import (
    MonitoringAlertPolicy,
    MonitoringAlertPolicyAlertStrategy,
    MonitoringAlertPolicyAlertStrategyNotificationRateLimit,
    MonitoringAlertPolicyConditions,
    MonitoringAlertPolicyConditionsConditionMatchedLog,
    MonitoringAlertPolicyConditionsConditionThreshold,
    MonitoringAlertPolicyConditionsConditionThresholdAggregations,
    MonitoringAlertPolicyDocumentation,
)
from stacks.toolchain import ITerraformDependable


def threshold(filter_: str, name: str, duration: str, above: float, aligner: str, period: str) -> Any:
    """A condition that holds while the filter's time series, aligned per `period`, stays above
    `above` for `duration`."""
    return MonitoringAlertPolicyConditions(
        display_name=name,
        condition_threshold=MonitoringAlertPolicyConditionsConditionThreshold(
            filter=filter_,
            comparison="COMPARISON_GT",
            threshold_value=above,
            duration=duration,
            aggregations=[
                MonitoringAlertPolicyConditionsConditionThresholdAggregations(
                    alignment_period=period, per_series_aligner=aligner
                )
            ],
        ),
    )


class Alerting:
    """Makes the team's alert policies, in the scope it is given, each notifying the same channels;
    `policies` keeps them in the order they were made."""

    def __init__(self, scope: Construct, props: MonitoringProps, notify: Sequence[str]) -> None:
        self.scope = scope
        """The construct the policies are created in."""
        self.props = props
        """The monitoring's props."""
        self.notify = list(notify)
        """The notification channels' names."""
        self.policies: list[MonitoringAlertPolicy] = []
        """Every policy made, in order."""

    def policy(
        self,
        id: str,
        title: str,
        severity: str,
        conditions: list[Any],
        text: str,
        after: Sequence[ITerraformDependable] = (),
        strategy: MonitoringAlertPolicyAlertStrategy | None = None,
    ) -> MonitoringAlertPolicy:
        """An alert policy titled `runonce TEAM: title` whose conditions are ORed, documented by
        `text` (markdown), created after the Monitoring API and `after`."""
        props = self.props
        policy = MonitoringAlertPolicy(
            self.scope,
            id,
            project=props.project,
            display_name=f"runonce {props.team}: {title}",
            combiner="OR",
            severity=severity,
            conditions=conditions,
            notification_channels=self.notify,
            documentation=MonitoringAlertPolicyDocumentation(content=text, mime_type="text/markdown"),
            alert_strategy=strategy,
            depends_on=[*props.apis.of(defaults.API_MONITORING), *after],
        )
        self.policies.append(policy)
        return policy

    def log_match(
        self, id: str, title: str, severity: str, filter_: str, labels: Sequence[str], text: str
    ) -> MonitoringAlertPolicy:
        """An alert policy on every log line matching the filter, its labels extracted from the
        line's JSON payload, notifying at most once per `notification_period_seconds`."""
        period = f"{self.props.thresholds.notification_period_seconds}s"
        return self.policy(
            id,
            title,
            severity,
            [
                MonitoringAlertPolicyConditions(
                    display_name=title,
                    condition_matched_log=MonitoringAlertPolicyConditionsConditionMatchedLog(
                        filter=filter_,
                        label_extractors={key: f"EXTRACT(jsonPayload.{key})" for key in labels},
                    ),
                )
            ],
            text,
            strategy=MonitoringAlertPolicyAlertStrategy(
                notification_rate_limit=MonitoringAlertPolicyAlertStrategyNotificationRateLimit(period=period)
            ),
        )
