"""The Django service, a one-file project: `gunicorn localscheduler.hosts.apps.django_app:application`."""

from __future__ import annotations

from django.conf import settings
from django.core.wsgi import get_wsgi_application
from django.urls import path
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_POST

from runonce import current_run, deduplicated

from . import job

job.start()

settings.configure(
    ROOT_URLCONF=__name__,
    ALLOWED_HOSTS=["127.0.0.1", "localhost"],
    SECRET_KEY="runonce-local-demo",
    MIDDLEWARE=["django.middleware.common.CommonMiddleware", "django.middleware.csrf.CsrfViewMiddleware"],
)


@csrf_exempt
@require_POST
@deduplicated
def close(request):
    run = current_run()
    return job.close(run, job.Knobs.read(run, request.headers, request.body), "gunicorn-django")


urlpatterns = [path("jobs/close", close)]
application = get_wsgi_application()
