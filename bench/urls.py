"""bench/embedded_gunicorn.py's web app: one trivial view, the request a web process serves while it drains."""

from django.http import HttpResponse
from django.urls import path


def ping(request):
    return HttpResponse(b"ok", content_type="text/plain")


urlpatterns = [path("ping", ping)]
