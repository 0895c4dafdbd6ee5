"""The job the backfill tests serve with functions-framework: every execution of its body leaves
one document (a fresh id) in $BACKFILL_EXECUTIONS, naming the run it ran, so a test counts how
many times each run's body ran."""

import os
import uuid

import functions_framework
from google.cloud import firestore

from runonce import current_run, deduplicated


@functions_framework.http
@deduplicated
def handle(request):
    """Record this execution of the run's body."""
    run = current_run()
    client = firestore.Client(database=os.environ.get("RUNONCE_DATABASE", "(default)"))
    execution = client.collection(os.environ["BACKFILL_EXECUTIONS"]).document(uuid.uuid4().hex)
    execution.create({"run_key": run.key, "schedule_time": run.schedule_time, "forced": run.forced})
    return {"ran": run.key}
