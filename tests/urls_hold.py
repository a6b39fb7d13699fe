"""A view that holds its request open until the test says so (tests/test_embedded_yield.py).

It marks itself in flight in Redis, waits for ``t:release``, and answers how
many jobs had completed by then: read inside the request, so a job that ran
while it was in flight is counted whatever the timing.
"""

from django.http import HttpResponse
from django.urls import path

from tests.worker_jobs import COUNTS, conn


def hold(request):
    client = conn()
    client.set("t:held", 1)
    # Short blocking reads: the suite's client has a socket timeout of its own.
    released = None
    for _ in range(90):
        released = client.blpop("t:release", timeout=1)
        if released:
            break
    completed = client.hlen(COUNTS)
    return HttpResponse(f"{'released' if released else 'timed out'} {completed}", content_type="text/plain")


urlpatterns = [path("hold", hold)]
