"""The example team: copy this file (or teams/_template.py) to teams/<your-team>.py and edit."""

from stacks.team import AppEngineJob, EventJob, Job, Overlap, PushRetry, Retry, Service, ServiceJob, Team

team = Team(
    name="example",
    project="runonce-example",
    region="europe-west1",
    labels={"owner": "platform", "cost-center": "demo"},
    # Every alert (docs/monitoring.md) e-mails the platform team; the stack creates the channel.
    alert_emails=["platform-oncall@example.com"],
    jobs=[
        Job(
            name="report",
            description="Publish the operations report every ten minutes",
            schedule="*/10 * * * *",
            time_zone="Europe/Berlin",
            source="report",
            timeout_seconds=120,
            attempt_deadline_seconds=60,
            # Three retries, 30 s doubling: the last comes after the 180 s lease of a crashed
            # attempt, and even if every attempt takes its 60 s deadline it ends (450 s) before
            # the next run ten minutes later.
            retry=Retry(retry_count=3, min_backoff_seconds=30),
        ),
        Job(
            name="sync",
            description="Publish the inventory sync report every two minutes",
            schedule="*/2 * * * *",
            source="report",
            timeout_seconds=60,
            attempt_deadline_seconds=30,
            retry=Retry(retry_count=5, min_backoff_seconds=5, max_backoff_seconds=60),
            # Every two minutes: a run lost to a crashed instance is redone by the next one.
            next_run_catches_up=True,
            # Its retries may reach the next run, which Scheduler may then skip: the run after
            # it catches up too.
            retries_may_skip_next_run=True,
        ),
        Job(
            name="catalog-sync",
            description="Copy the catalog's changes since the previous run every five minutes",
            schedule="*/5 * * * *",
            source="sync",
            timeout_seconds=60,
            attempt_deadline_seconds=30,
            # Retries 40, 90, 160 and 250 s after the first attempt, even if each takes its 30 s
            # deadline: past the 120 s lease of an attempt whose instance died (or of the run
            # before it, under `wait`), and all over before the next run five minutes later.
            retry=Retry(retry_count=4, min_backoff_seconds=10, max_backoff_seconds=60),
            # Each run copies the window since its previous run's cursor (functions/sync). Under
            # `allow` two runs in flight together may read the same previous and copy overlapping
            # windows (docs/schedules/previous.md); `wait` runs them one after the other.
            overlap=Overlap.WAIT,
            # Where the first run's window starts.
            env={"SYNC_START": "2026-12-01T00:00:00Z"},
        ),
        Job(
            name="ledger-close",
            description="Close the hourly ledger",
            schedule="0 * * * *",
            time_zone="America/New_York",
            source="report",
            timeout_seconds=300,
            attempt_deadline_seconds=300,
            retention_seconds=14 * 24 * 3600,
        ),
    ],
    event_jobs=[
        EventJob(
            name="orders",
            description="Record each paid order's receipt once",
            source="orders_events",
            timeout_seconds=60,
            # Redeliver after 10 s, then up to 5 min apart; after 15 deliveries Pub/Sub moves the
            # message to the dead-letter topic itself. Even 10 s apart, the 15th comes 140 s after
            # the first, after the 120 s lease of an attempt whose instance died.
            retry=PushRetry(min_backoff_seconds=10, max_backoff_seconds=300),
            max_delivery_attempts=15,
            # Redelivered for up to a day; an order a day old is dead-lettered, not run.
            retry_window_seconds=24 * 3600,
            max_event_age_seconds=24 * 3600,
            retention_seconds=2 * 24 * 3600,
        ),
    ],
    # Cloud Run services whose own code runs scheduled jobs (docs/stacks/services.md).
    services=[
        # Deployed by the stack: examples/service (FastAPI, a @deduplicated job at /jobs/close),
        # the image `make service-image IMAGE=...` builds and pushes.
        Service(
            name="closer",
            image="europe-west1-docker.pkg.dev/runonce-example/jobs/closer:1",
            timeout_seconds=120,
            max_instances=2,
        ),
        # A service that exists already (no image): the stack only reads it and grants its runtime
        # account the ledger; the team sets the RUNONCE_* variables on it (docs/stacks/services.md).
        Service(name="billing-api"),
    ],
    service_jobs=[
        ServiceJob(
            name="books-close",
            description="Close the books every fifteen minutes",
            schedule="*/15 * * * *",
            service="closer",
            path="/jobs/close",
            attempt_deadline_seconds=60,
            # Retries 30, 90 and 210 s after the first attempt: the last after the 180 s lease
            # (timeout + 60 s) of an attempt whose instance died, and all over before the next run.
            retry=Retry(retry_count=3, min_backoff_seconds=30),
        ),
        ServiceJob(
            name="billing-close",
            description="Close the billing period every twenty minutes",
            schedule="*/20 * * * *",
            time_zone="Europe/Berlin",
            service="billing-api",
            path="/jobs/close",
            attempt_deadline_seconds=60,
            # The existing service's 300 s timeout gives a 360 s lease: the fourth retry, 450 s
            # after the first attempt, takes over a run whose instance died.
            retry=Retry(retry_count=4, min_backoff_seconds=30),
        ),
    ],
    # A job on the project's existing App Engine application (docs/stacks/services.md): its handler
    # is @deduplicated at /jobs/sweep of the default service. Scheduler creates App Engine jobs only
    # in the application's region: its location as `gcloud app describe` prints it ("europe-west",
    # Scheduler's europe-west1), which the team file states because no data source reads it.
    app_engine_location="europe-west",
    app_engine_jobs=[
        AppEngineJob(
            name="sweep",
            description="Sweep expired carts every thirty minutes",
            schedule="*/30 * * * *",
            relative_uri="/jobs/sweep",
        ),
    ],
)
