"""The servers that run a handler, locally, as Cloud Run runs them: a pool of instances per
function (`pool`), each one process of a `pool.Host`. A host is one module here saying how an
instance starts (its command line and environment): `functions_framework` (serving a function
folder's entry point through `function_source`) is the pool's default; a host for another server
(gunicorn or uvicorn serving an app) is another module beside it, handed to the pool as `host`.
The faults that kill an instance holding a run's claim need the instance to honour
`pool.KILL_HEADER`, as `function_source` does.
"""
