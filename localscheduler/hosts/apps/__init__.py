"""The local services (`localscheduler.hosts.service`): one small app per framework, each a route
POST /jobs/close under runonce's `@deduplicated` for it running `job.close`, and on Flask and
FastAPI a route POST /events/orders under `@deduplicated_event` running `job.order`. Served by
real servers: `flask_app` and `django_app` by gunicorn (`localscheduler.hosts.gunicorn`),
`fastapi_app` by uvicorn (`localscheduler.hosts.uvicorn`)."""
