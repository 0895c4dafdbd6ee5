"""A one-file Django project: `gunicorn tests.hosts.apps.django_app:application`."""

from __future__ import annotations

from django.conf import settings
from django.core.wsgi import get_wsgi_application
from django.urls import path
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_POST

from runonce import deduplicated

from . import job

settings.configure(
    ROOT_URLCONF=__name__,
    ALLOWED_HOSTS=["127.0.0.1", "localhost"],
    SECRET_KEY="runonce-test-app",
    MIDDLEWARE=["django.middleware.common.CommonMiddleware", "django.middleware.csrf.CsrfViewMiddleware"],
)


@csrf_exempt
@require_POST
@deduplicated
def close(request):
    return job.body(request.headers)


urlpatterns = [path("jobs/close", close)]
application = get_wsgi_application()
