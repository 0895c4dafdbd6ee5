"""A team whose runs are recorded in Memorystore for Valkey (docs/stacks/stores.md): copy this
file when a Firestore database's write rate or price per operation does not suit the team."""

from stacks.team import EventJob, Job, Network, Retry, Team, Valkey

team = Team(
    name="ledger",
    project="runonce-ledger",
    region="europe-west1",
    labels={"owner": "platform", "cost-center": "ledger"},
    alert_emails=["platform-oncall@example.com"],
    # One instance, cluster mode disabled, one replica in another zone, noeviction, AOF every
    # second, TLS; the stack creates the VPC network runonce-ledger, its subnetwork, the
    # connection policy for the instance's endpoints and the functions' VPC connector.
    store=Valkey(
        node_type="STANDARD_SMALL",
        replicas=1,
        wait_replicas=1,
        network=Network(subnet_range="10.64.0.0/24", connector_range="10.64.1.0/28"),
    ),
    jobs=[
        Job(
            name="close",
            description="Close the ledger every five minutes",
            schedule="*/5 * * * *",
            source="report",
            timeout_seconds=60,
            attempt_deadline_seconds=30,
            # Two retries, 45 s doubling: the last comes after the 120 s lease of a crashed
            # attempt, and ends before the next run five minutes later.
            retry=Retry(retry_count=2, min_backoff_seconds=45),
        ),
    ],
    event_jobs=[
        EventJob(
            name="entries",
            description="Record each ledger entry once",
            source="orders_events",
            timeout_seconds=60,
        ),
    ],
)
