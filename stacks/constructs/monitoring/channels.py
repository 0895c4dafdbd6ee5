"""Whom the team's alerts notify: e-mail channels the stack creates, and the project's existing
channels, read by display name."""

from __future__ import annotations

import hashlib
import re

from constructs import Construct

from stacks.config import defaults
from stacks.constructs import provider
from stacks.constructs.monitoring.props import MonitoringProps
from stacks.constructs.provider import MonitoringNotificationChannel

EMAIL_CHANNEL = "email"
"""The only channel type the stack creates (policy rule RO-MON-1)."""


def channel_id(address: str, kind: str = "email") -> str:
    """The construct id of an address's e-mail channel (or of an existing channel's data source,
    by display name): the same for the same value wherever it is listed (reordering the list
    changes no channel), distinct for distinct values."""
    digest = hashlib.sha256(address.encode()).hexdigest()[:6]
    return f"{kind}-{re.sub(r'[^a-z0-9]+', '-', address.lower()).strip('-')}-{digest}"


def email_channels(scope: Construct, props: MonitoringProps) -> list[MonitoringNotificationChannel]:
    """One e-mail channel per address of `MonitoringProps.emails`."""
    return [
        MonitoringNotificationChannel(
            scope,
            channel_id(address),
            project=props.project,
            type=EMAIL_CHANNEL,
            display_name=f"runonce {props.team}: {address}",
            labels={"email_address": address},
            depends_on=props.apis.of(defaults.API_MONITORING),
        )
        for address in props.emails
    ]


def existing_channels(
    scope: Construct, props: MonitoringProps
) -> list[provider.DataGoogleMonitoringNotificationChannel]:
    """The `google_monitoring_notification_channel` data source of each display name in
    `MonitoringProps.channels`. Read at plan (no depends_on: a data source that depends on a
    resource with changes is read during the apply), so a channel that does not exist, or is not
    unique, stops the plan."""
    return [
        provider.DataGoogleMonitoringNotificationChannel(
            scope, channel_id(display_name, "channel"), project=props.project, display_name=display_name
        )
        for display_name in props.channels
    ]
