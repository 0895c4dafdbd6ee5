"""A Flask app: `gunicorn tests.hosts.apps.flask_app:app`."""

from __future__ import annotations

import flask

from runonce import deduplicated

from . import job

app = flask.Flask(__name__)


@app.post("/jobs/close")
@deduplicated
def close():
    return job.body(flask.request.headers)
