"""A team's monitoring settings: who its alerts reach (`alerts`, `notification_channels`,
`alert_emails`), when they fire (`alert_thresholds`), and whether its log filters fit Cloud
Logging's length limit; docs/monitoring.md describes them."""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterator

from stacks import naming
from stacks.config.problem import Problem
from stacks.config.sharing import shared_functions
from stacks.config.team import Team

# The full name Cloud Monitoring gives a channel ("projects/[PROJECT_ID]/notificationChannels/
# [CHANNEL_ID]", provider docs): the data source that reads a team's channels cannot look one up
# by it (its filters are display_name, type and labels).
CHANNEL_NAME = re.compile(r"^projects/[^/]+/notificationChannels/[^/]+$")
MAX_CHANNEL_DISPLAY_NAME = 512
"""A channel's display name "is limited to 512 Unicode characters" (NotificationChannel reference)."""
# The data source writes `display_name="<value>"` into the API's filter unescaped: a quote, a
# backslash or a line break would break the filter.
UNFILTERABLE = re.compile(r'["\\\n\r]')
# One address, no display name or list: what the e-mail channel's `email_address` label takes.
EMAIL = re.compile(r"^[^@\s,;<>\"]+@[^@\s,;<>\"]+\.[A-Za-z]{2,}$")
MAX_LOG_FILTER = 20000
"""Cloud Logging's longest filter, in characters ("The maximum length of the filter is 20000
characters", the LogMetric reference)."""
SERVICE_CLAUSE = len('resource.labels.service_name="" OR ') + naming.MAX_FUNCTION_NAME
"""The most one function adds to a filter naming the team's services, as Logging receives it at
apply time: the service's short name (the `service_name` label; a service is named like its
function, at most 49 characters), not its full name (docs/monitoring.md)."""
FILTER_REST = 200
"""The rest of the longest filter: the resource type, the logger and the outcome clauses."""
MAX_FUNCTIONS = (MAX_LOG_FILTER - FILTER_REST) // SERVICE_CLAUSE
SUSTAINED_RANGE = (60, 3600)
NOTIFICATION_PERIOD_RANGE = (60, 86400)


def alert_settings(team: Team) -> Iterator[Problem]:
    """Every problem with the team's alert settings, in field order."""

    def problem(field: str, message: str, fix: str) -> Problem:
        return Problem(team.name, None, field, message, fix)

    if team.alerts and not team.notification_channels and not team.alert_emails:
        yield problem(
            "alerts",
            "the team's alerts would notify no one: it names no notification channel and no e-mail",
            'set alert_emails=["oncall@example.com"] (the stack creates an e-mail channel for each) '
            'or notification_channels=["<an existing channel\'s display name>"], or alerts=False to '
            "deploy without alerts on purpose",
        )
    if not team.alerts and (team.notification_channels or team.alert_emails):
        yield problem(
            "alerts",
            "alerts=False, yet notification_channels or alert_emails are given: nothing would notify them",
            "remove alerts=False to create the alerts, or remove the channels and e-mails",
        )
    for index, channel in enumerate(team.notification_channels):
        field = f"notification_channels[{index}]"
        if CHANNEL_NAME.match(channel):
            yield problem(
                field,
                f"{channel!r} is a channel's full name: the stack reads each channel by its display "
                "name, so that a missing one fails the plan",
                f"write its display name instead (`gcloud beta monitoring channels describe {channel} "
                "--format='value(displayName)'`)",
            )
        elif not channel.strip() or len(channel) > MAX_CHANNEL_DISPLAY_NAME or UNFILTERABLE.search(channel):
            yield problem(
                field,
                f"{channel!r} cannot name a channel: a display name has 1-{MAX_CHANNEL_DISPLAY_NAME} "
                "characters, and the channel is looked up with it in a filter that cannot hold a "
                "quote, a backslash or a line break",
                "rename the channel without them (`gcloud beta monitoring channels update`) and "
                "write its display name here",
            )
    for index, address in enumerate(team.alert_emails):
        if not EMAIL.match(address):
            yield problem(
                f"alert_emails[{index}]",
                f"{address!r} is not one e-mail address",
                "write one plain address per entry, e.g. oncall@example.com",
            )
    for field, values in (
        ("notification_channels", team.notification_channels),
        ("alert_emails", team.alert_emails),
    ):
        repeated = sorted(value for value, count in Counter(values).items() if count > 1)
        if repeated:
            yield problem(field, f"{repeated[0]!r} is listed twice", "list each one once")
    functions = len(shared_functions(team)) + len(team.event_jobs)
    if functions > MAX_FUNCTIONS:
        yield problem(
            "jobs",
            f"the team runs {functions} functions: the log filters of its monitoring name each one's "
            f"service and would pass Cloud Logging's {MAX_LOG_FILTER} characters",
            f"keep it to {MAX_FUNCTIONS} functions: let jobs with the same code and settings share one "
            "(share_functions=True), or split the team",
        )
    thresholds = team.alert_thresholds
    for field, value, (low, high) in (
        ("sustained_seconds", thresholds.sustained_seconds, SUSTAINED_RANGE),
        ("notification_period_seconds", thresholds.notification_period_seconds, NOTIFICATION_PERIOD_RANGE),
    ):
        if not low <= value <= high or value % 60:
            yield problem(
                f"alert_thresholds.{field}",
                f"{value} s is not a whole number of minutes from {low} to {high} s",
                f"use a multiple of 60 from {low} to {high} (Cloud Monitoring takes a condition's "
                "duration in whole minutes)",
            )
