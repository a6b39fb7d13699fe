"""What every dashboard view shares: the access rules, error handling, paging input, rendering.

Pages are GET-only and need the view permission; actions are POST-only, CSRF
checked (even if a project drops the middleware) and need the manage
permission. A Redis outage renders a 503 page; an action the API refuses
(stale entry, embedded process...) becomes a message, never a 500.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable
from typing import Any

from django.contrib import messages
from django.contrib.admin.views.decorators import staff_member_required
from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import render
from django.urls import reverse
from django.utils.http import url_has_allowed_host_and_scheme
from django.views.decorators.cache import never_cache
from django.views.decorators.csrf import csrf_protect
from django.views.decorators.http import require_POST, require_safe

from djwork import api
from djwork.conf import get_config
from djwork_dashboard.permissions import can_manage, can_view

logger = logging.getLogger("djwork.dashboard")

PER_PAGE = 25
View = Callable[..., HttpResponse]


class NotFound(Http404):
    """What a page's URL names does not exist: every page answers it the same way, a 404 in the dashboard's
    layout saying what was not found (one page redirected, another gave Django's bare 404, two an empty 200)."""

    def __init__(self, title: str, detail: str = "", back_to: str = "djwork_dashboard:overview",
                 back_label: str = "Overview") -> None:
        super().__init__(title)
        self.title, self.detail, self.back_to, self.back_label = title, detail, back_to, back_label


def not_found(request: HttpRequest, error: NotFound) -> HttpResponse:
    return render_page(request, "djwork_dashboard/not_found.html", {
        "title": error.title, "detail": error.detail, "back_url": reverse(error.back_to),
        "back_label": error.back_label}, status=404)


def redis_unavailable(request: HttpRequest, error: api.RedisUnavailable) -> HttpResponse:
    logger.warning("djwork dashboard: Redis error on %s: %s", request.path, error)
    # Without the permissions and the Redis it could not reach, the page told a superuser "read-only" and
    # left an operator guessing which server was down.
    return render(request, "djwork_dashboard/error.html", {
        "error": str(error), "can_manage": can_manage(request.user), "redis_where": api.redis_location()},
        status=503)


def page_view(view: View) -> View:
    """A read-only page: staff with the view permission."""

    @never_cache
    @staff_member_required
    @require_safe
    @functools.wraps(view)
    def wrapped(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        if not can_view(request.user):
            raise PermissionDenied("You need the djwork_dashboard.view_dashboard permission.")
        try:
            return view(request, *args, **kwargs)
        except NotFound as error:
            return not_found(request, error)
        except api.RedisUnavailable as error:
            return redis_unavailable(request, error)

    return wrapped


def action_view(view: View) -> View:
    """A POST action: staff with the manage permission, CSRF checked."""

    @never_cache
    @staff_member_required
    @require_POST
    @csrf_protect
    @functools.wraps(view)
    def wrapped(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        if not can_manage(request.user):
            raise PermissionDenied("You need the djwork_dashboard.manage_dashboard permission to do this.")
        try:
            return view(request, *args, **kwargs)
        except NotFound as error:
            return not_found(request, error)
        except api.RedisUnavailable as error:
            # Before ApiError, its base: an outage is a 503 page, not a message on the page it left.
            return redis_unavailable(request, error)
        except api.ApiError as error:
            messages.error(request, str(error))
            return back(request)

    return wrapped


def safe_next(request: HttpRequest) -> str:
    """The form's ``next`` if it is a URL on this site (never another host or a javascript: URL), else ""."""
    target = request.POST.get("next") or request.GET.get("next") or ""
    if target and url_has_allowed_host_and_scheme(target, allowed_hosts={request.get_host()},
                                                   require_https=request.is_secure()):
        return target
    return ""


def back(request: HttpRequest, default: str = "djwork_dashboard:overview", *args: Any) -> HttpResponseRedirect:
    """Redirect to the form's ``next`` (same site only), else to ``default``."""
    return HttpResponseRedirect(safe_next(request) or reverse(default, args=args))


def page_number(request: HttpRequest) -> int:
    """?page=N; a bad value becomes page 1 with a message saying so."""
    raw = request.GET.get("page", "1")
    try:
        number = int(raw)
    except ValueError:
        number = 0
    if number < 1:
        messages.warning(request, f"“{raw[:40]}” is not a page number; showing page 1.")
        return 1
    return number


def clamp_page(request: HttpRequest, page: Any, fetch: Callable[[int], Any]) -> Any:
    """Past the last page: say so and show the last page instead of an empty one."""
    if page.total and page.number > page.pages:
        messages.warning(request, f"Page {page.number} is past the end ({page.pages} pages); showing the last page.")
        return fetch(page.pages)
    return page


def newest_first(request: HttpRequest, default: bool) -> bool:
    order = request.GET.get("order", "")
    return default if order not in ("asc", "desc") else order == "desc"


def render_page(request: HttpRequest, template: str, context: dict[str, Any], status: int = 200) -> HttpResponse:
    """Adds what the layout needs: the summary bar's counters, the health strip and whether buttons show."""
    context.setdefault("summary", api.Stats.fetch())
    config = get_config()
    context.setdefault("health", api.Health.fetch(config.dashboard_latency_warning, config.heartbeat_interval))
    context["can_manage"] = can_manage(request.user)
    context["redis_where"] = api.redis_location()
    return render(request, template, context, status=status)


def confirm(request: HttpRequest, title: str, question: str, fields: dict[str, Any], danger: bool = True,
            button: str = "Yes, do it") -> HttpResponse:
    """The second step of a bulk or destructive action: repost the same form with ``confirmed=1``."""
    items = []
    for name, value in fields.items():
        for item in value if isinstance(value, list) else [value]:
            items.append((name, item))
    return render_page(request, "djwork_dashboard/confirm.html", {
        "title": title, "question": question, "fields": items, "danger": danger, "button": button,
        "action": request.path, "cancel": safe_next(request) or reverse("djwork_dashboard:overview"),
    })
