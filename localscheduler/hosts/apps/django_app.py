"""The Django service, a one-file project: `gunicorn localscheduler.hosts.apps.django_app:application`.
A scheduled job under `@deduplicated` and an event job under `@deduplicated_event` (Pub/Sub push),
both Django views."""

from __future__ import annotations

from collections.abc import Mapping
from contextvars import ContextVar

from django.conf import settings
from django.core.wsgi import get_wsgi_application
from django.urls import path
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_POST

from runonce import current_run, deduplicated, deduplicated_event

from . import job

job.start()

HOST = "gunicorn-django"
# The request's headers, for the event job (it receives the event alone): a fault names its run there.
_headers: ContextVar[Mapping[str, str] | None] = ContextVar("headers", default=None)


def keep_headers(get_response):
    """Middleware: the request's headers where the event job can read them."""

    def middleware(request):
        _headers.set(request.headers)
        return get_response(request)

    return middleware


settings.configure(
    ROOT_URLCONF=__name__,
    ALLOWED_HOSTS=["127.0.0.1", "localhost"],
    SECRET_KEY="runonce-local-demo",
    MIDDLEWARE=[
        f"{__name__}.keep_headers",
        "django.middleware.common.CommonMiddleware",
        "django.middleware.csrf.CsrfViewMiddleware",
    ],
)


@csrf_exempt
@require_POST
@deduplicated
def close(request):
    run = current_run()
    return job.close(run, job.Knobs.read(run, request.headers, request.body), HOST)


@csrf_exempt
@require_POST
@deduplicated_event
def orders(event):
    return job.order(current_run(), event, _headers.get() or {}, HOST)


urlpatterns = [path("jobs/close", close), path("events/orders", orders)]
application = get_wsgi_application()
