"""Team template: copy to teams/<your-team>.py, set the values marked "set:", then deploy.

    cp teams/_template.py teams/<your-team>.py
    $EDITOR teams/<your-team>.py
    make synth                      # validates every team and writes cdktf.out/stacks/<team>
    make policy                     # least-privilege rule pack and checkov on every stack
    make deploy STACK=<your-team>   # npx cdktf deploy <your-team>

Files whose name starts with "_" (like this one) are not deployed. Every field not set here
keeps the secure default documented in stacks/team.py; a bad value is reported at synth time
with the file, the team, the job, the field and how to fix it, and so are the placeholders
below ("my-team", "my-gcp-project") until you replace them. STACK may also be the file's name.
"""

from stacks.team import Job, Retry, Team  # and AppEngineJob, Overlap, Service, ServiceJob for options below

team = Team(
    name="my-team",  # set: lowercase, hyphens, at most 20 characters; names the stack
    project="my-gcp-project",  # set: the GCP project id to deploy into
    region="europe-west1",  # set: region of the functions and Scheduler jobs
    labels={"owner": "my-team"},
    alert_emails=["my-team-oncall@example.com"],  # set: who gets the alerts (docs/monitoring.md);
    # or notification_channels=["<an existing channel's display name>"], or alerts=False on purpose
    jobs=[
        Job(
            name="nightly-export",  # set: lowercase, hyphens; unique within the team
            description="Export yesterday's orders",
            schedule="0 3 * * *",  # unix-cron only ("every 5 minutes" is rejected)
            time_zone="Europe/Berlin",
            source="report",  # set: a folder under functions/ with main.py and requirements.txt
            # ... or, to start a Google API once per run instead of your own code, no source but
            # target=Workflow("projects/P/locations/L/workflows/W") (stacks/targets.py, docs/targets.md)
            entry_point="handle",  # the @deduplicated handler in that main.py
            timeout_seconds=300,  # at most 3600; the lease is this plus a margin
            attempt_deadline_seconds=180,  # 15-1800 and at most timeout_seconds
            retry=Retry(),  # 5 retries, 20 s to 10 min apart: safe, a finished run is not run again
            # overlap=Overlap.SKIP,  # run still going: SKIP records the next skipped, WAIT runs it after
            # (a job that goes on from its previous run's result, as source="sync" does, needs SKIP or WAIT)
            # catch_up_seconds=6 * 3600,  # the watchdog starts a run missed this recently itself, once
            env={},
        ),
    ],
    # Jobs whose @deduplicated handler lives in a Cloud Run service or on App Engine instead of a
    # function (docs/stacks/services.md; teams/example.py has every kind):
    # services=[
    #     # deployed by the stack from your image (`make service-image IMAGE=...` builds examples/service)
    #     Service(name="closer", image="europe-west1-docker.pkg.dev/my-gcp-project/jobs/closer:1"),
    #     # a service that exists already: the stack reads it and grants its account the ledger
    #     Service(name="billing-api"),
    # ],
    # service_jobs=[
    #     ServiceJob(name="books-close", schedule="0 1 * * *", service="closer", path="/jobs/close"),
    #     ServiceJob(name="billing-close", schedule="0 2 * * *", service="billing-api", path="/jobs/close"),
    # ],
    # app_engine_location="europe-west",  # as `gcloud app describe` prints it: Scheduler runs the jobs there
    # app_engine_jobs=[
    #     AppEngineJob(name="sweep", schedule="0 4 * * *", relative_uri="/jobs/sweep"),  # its handler's path
    # ],
)
