"""The URL conf of the Django test client: a test puts its view here (`serve_django`)."""

from __future__ import annotations

urlpatterns: list = []
