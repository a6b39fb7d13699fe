"""A link to the dashboard on the Django admin index, for whoever may view it.

The table-less Dashboard model is registered with an admin whose only URL
redirects to the dashboard, so the admin index lists "djwork / Job dashboard"
with no template override (an app's override of admin/index.html only wins
when the app is listed before django.contrib.admin, which projects rarely do).
"""

from django.contrib import admin
from django.http import HttpRequest, HttpResponseRedirect
from django.urls import path, reverse

from djwork_dashboard.models import Dashboard
from djwork_dashboard.permissions import can_view


@admin.register(Dashboard)
class DashboardAdmin(admin.ModelAdmin):
    def get_urls(self):
        # Only the changelist: the add/change/delete views would query a table that does not exist.
        name = f"{self.opts.app_label}_{self.opts.model_name}_changelist"
        return [path("", self.admin_site.admin_view(self.changelist_view), name=name)]

    def changelist_view(self, request: HttpRequest, extra_context=None):
        return HttpResponseRedirect(reverse("djwork_dashboard:overview"))

    def has_module_permission(self, request: HttpRequest) -> bool:
        return can_view(request.user)

    def has_view_permission(self, request: HttpRequest, obj=None) -> bool:
        return can_view(request.user)

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj=None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj=None) -> bool:
        return False
