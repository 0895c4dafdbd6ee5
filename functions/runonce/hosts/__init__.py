"""The web frameworks a job runs under (its hosts), one module each, loaded only when used.

`flask`: functions-framework and Flask views (werkzeug's request and response); `django`: Django
views; `starlette`: Starlette and FastAPI routes. Each reads its framework's request into the
core's `Incoming` and turns an `Answer` into its framework's JSON response (`runonce.core.host`).
"""
