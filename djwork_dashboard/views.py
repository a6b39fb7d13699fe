"""Dashboard views: thin, staff-only, reading through djwork.api (never raw Redis)."""

from django.contrib.admin.views.decorators import staff_member_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.views.decorators.cache import never_cache

from djwork import api


@never_cache
@staff_member_required
def overview(request: HttpRequest) -> HttpResponse:
    return render(request, "djwork_dashboard/overview.html", {"stats": api.Stats.fetch()})
