"""``/djwork/metrics``: Prometheus's text format, for a staff session or a scraper with ``METRICS_TOKEN``.

No login redirect: a scraper that lost its token must see a 401, not a 302
to a login form it would scrape as an empty page.
"""

from __future__ import annotations

import hmac

from django.http import HttpRequest, HttpResponse
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_safe

from djwork import api
from djwork.metrics.prometheus import CONTENT_TYPE, exposition
from djwork.settings.conf import get_config
from djwork_dashboard.permissions import can_view


def _bearer_ok(request: HttpRequest) -> bool:
    token = get_config().metrics_token
    header = request.headers.get("Authorization", "")
    if not token or not header.startswith("Bearer "):
        return False
    return hmac.compare_digest(header[len("Bearer "):].strip().encode(), token.encode())


@never_cache
@require_safe
def prometheus_metrics(request: HttpRequest) -> HttpResponse:
    if not (_bearer_ok(request) or can_view(request.user)):
        response = HttpResponse("a staff session with djwork_dashboard.view_dashboard, or the METRICS_TOKEN bearer"
                                " token, is needed\n", status=401, content_type="text/plain")
        response["WWW-Authenticate"] = 'Bearer realm="djwork"'
        return response
    try:
        body = exposition()
    except api.RedisUnavailable as error:
        return HttpResponse(f"Redis unavailable: {error}\n", status=503, content_type="text/plain")
    return HttpResponse(body, content_type=CONTENT_TYPE)
