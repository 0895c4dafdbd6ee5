"""The demo's services (`localscheduler.demos.services`): one small app per framework, each a route
POST /jobs/close under runonce's adapter for it, all running `job.close`. Served by real servers:
`flask_app` and `django_app` by gunicorn (`localscheduler.hosts.gunicorn`), `fastapi_app` by
uvicorn (`localscheduler.hosts.uvicorn`)."""
