"""bench/embedded_gunicorn.py's web app: one trivial view, the request a web process serves while it drains."""

import os

from django.http import HttpResponse
from django.urls import path

PROFILE = bool(os.environ.get("BENCH_PROFILE"))


def ping(request):
    if PROFILE:
        from bench import request_marks

        request_marks.mark("view")
    return HttpResponse(b"ok", content_type="text/plain")


urlpatterns = [path("ping", ping)]
