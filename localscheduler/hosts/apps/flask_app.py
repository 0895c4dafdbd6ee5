"""The Flask service: `gunicorn localscheduler.hosts.apps.flask_app:app`. A scheduled job under
`@deduplicated` and an event job under `@deduplicated_event` (Pub/Sub push), both Flask views."""

from __future__ import annotations

import flask

from runonce import current_run, deduplicated, deduplicated_event

from . import job

job.start()

app = flask.Flask(__name__)
HOST = "gunicorn-flask"


@app.post("/jobs/close")
@deduplicated
def close():
    run = current_run()
    return job.close(run, job.Knobs.read(run, flask.request.headers, flask.request.get_data()), HOST)


@app.post("/events/orders")
@deduplicated_event
def orders(event):
    return job.order(current_run(), event, flask.request.headers, HOST)
