"""A second team in its own project: shows two teams deploying side by side, one stack each."""

from stacks.team import Job, Retry, Team

team = Team(
    name="payments",
    project="runonce-payments",
    region="us-central1",
    labels={"owner": "payments", "cost-center": "finance"},
    # The payments team's existing on-call channel, by its display name, and an e-mail channel the
    # stack creates. The plan reads the existing one and stops unless exactly one channel of the
    # project has that name: create it first (docs/monitoring.md, "Notification channels").
    notification_channels=["Payments on-call"],
    alert_emails=["payments-oncall@example.com"],
    point_in_time_recovery=True,
    jobs=[
        Job(
            name="settle",
            description="Settle the previous day's card payments",
            schedule="30 2 * * *",
            time_zone="America/Chicago",
            source="report",
            timeout_seconds=900,
            attempt_deadline_seconds=600,
            memory="512Mi",
            retry=Retry(retry_count=5, min_backoff_seconds=60, max_backoff_seconds=900, max_doublings=4),
            retention_seconds=30 * 24 * 3600,
            labels={"data-class": "confidential"},
        ),
    ],
)
