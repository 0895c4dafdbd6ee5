"""The source file a local instance hands to functions-framework (`--source`).

It puts the instance on the scheduler's accelerated clock through runonce's own clock hook,
makes one Firestore write so the process's one-off gRPC start-up (about 2 s) is paid before the
instance accepts requests (Cloud Run's startup probe, locally; on an accelerated clock an
unwarmed first request would outlive its lease), then loads the job's real `main.py` and
exposes its entry point unchanged, so the instance serves exactly the deployed function code.

Environment: RUNONCE_LOCAL_CLOCK_FILE (a file holding an AcceleratedClock spec, written once the
scheduler starts its clock; read at the first request; unset, the instance keeps the real clock,
as `make bench` wants), RUNONCE_LOCAL_SOURCE (path of the job's main.py), RUNONCE_LOCAL_TARGET
(its entry point), RUNONCE_LOCAL_ANONYMOUS_CREDENTIALS (set to 1 by the demo's proxied job:
google.auth.default() then answers anonymous credentials, so the proxy calls the local stand-in
with no token and never asks a metadata server; the library itself is unchanged).

A request with the `pool.KILL_HEADER` header (the push proxy's "killed holding the claim"
fault, the local scheduler's stuck claim) SIGKILLs the instance right after the runonce core
logs that the body of the run named by the header started: the claim is held, the body never
runs, nothing is released, as when an instance crashes mid-run. The job's code is not involved.
"""

import importlib.util
import logging
import os
import signal
import sys
from pathlib import Path

import flask
from google.cloud import firestore

from localscheduler.clock import follow_local_clock
from localscheduler.hosts.pool import KILL_HEADER
from runonce.contract import BODY_FIELD, PROJECT_VARIABLE, BodyStage

if os.environ.get("RUNONCE_LOCAL_ANONYMOUS_CREDENTIALS") == "1":
    import google.auth
    import google.auth.credentials

    def _anonymous(*args, **kwargs):
        return google.auth.credentials.AnonymousCredentials(), os.environ.get(PROJECT_VARIABLE)

    google.auth.default = _anonymous


class _DieHoldingClaim(logging.Filter):
    """On runonce's logger: write the body-started line of the run the request's KILL_HEADER
    names, then kill the whole instance."""

    def filter(self, record: logging.LogRecord) -> bool:
        fields = getattr(record, "fields", {})
        if (
            fields.get(BODY_FIELD) == BodyStage.STARTED.value
            and flask.has_request_context()
            and flask.request.headers.get(KILL_HEADER) == fields.get("run_key")
        ):
            for handler in logging.getLogger(record.name).handlers:
                handler.handle(record)
                handler.flush()
            os.killpg(os.getpgrp(), signal.SIGKILL)
        return True


logging.getLogger("runonce").addFilter(_DieHoldingClaim())

follow_local_clock()
firestore.Client().collection("localscheduler_warmup").document("probe").set({"warm": True})

_source = Path(os.environ["RUNONCE_LOCAL_SOURCE"]).resolve()
sys.path.append(str(_source.parent))
_spec = importlib.util.spec_from_file_location(f"job_{_source.parent.name}", _source)
assert _spec is not None and _spec.loader is not None, f"cannot load {_source}"
_job_module = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_job_module)
globals()[os.environ["RUNONCE_LOCAL_TARGET"]] = getattr(_job_module, os.environ["RUNONCE_LOCAL_TARGET"])
