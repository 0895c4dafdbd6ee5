"""The Flask service: `gunicorn localscheduler.hosts.apps.flask_app:app`."""

from __future__ import annotations

import flask

from runonce import current_run, deduplicated

from . import job

job.warm_up()

app = flask.Flask(__name__)


@app.post("/jobs/close")
@deduplicated
def close():
    return job.close(current_run(), flask.request.headers, "gunicorn-flask")
