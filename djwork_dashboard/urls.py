"""Mount with ``path("djwork/", include("djwork_dashboard.urls"))``."""

from django.urls import path, re_path, register_converter

from djwork_dashboard import views
from djwork_dashboard.views import batches, limits, locks, metrics, periodic, prometheus


class SetKindConverter:
    regex = "scheduled|retries|dead"

    def to_python(self, value: str) -> str:
        return value

    def to_url(self, value: str) -> str:
        return value


register_converter(SetKindConverter, "djwork_set")

app_name = "djwork_dashboard"

# Queue names as Sidekiq's Web UI accepts them (docs/wire.md, check Q2); anything else is a 404.
QUEUE = r"(?P<name>[A-Za-z0-9_:.\-]+)"
# Periodic entry ids as docs/periodic.md defines them; the view 404s one over 200 characters or not known.
PERIODIC_ENTRY = r"(?P<entry_id>[A-Za-z0-9_.\-]+)"
# Limiter names as djwork.limiter accepts them (docs/limiters.md); the view 404s one over 200 characters.
LIMITER = r"(?P<name>[A-Za-z0-9_.:\-]+)"
# Batch ids as djwork.Batch makes them (docs/batches.md); the view 404s one over 64 characters.
BID = r"(?P<bid>[A-Za-z0-9_\-]+)"

urlpatterns = [
    path("", views.overview, name="overview"),
    path("stats.json", views.stats_json, name="stats_json"),
    path("metrics", prometheus.prometheus_metrics, name="prometheus"),  # no slash: Prometheus's usual path
    path("busy/", views.busy, name="busy"),
    path("busy/action", views.busy_action, name="busy_action"),
    path("queues/", views.queues, name="queues"),
    re_path(rf"^queues/{QUEUE}/$", views.queue, name="queue"),
    re_path(rf"^queues/{QUEUE}/action$", views.queue_action, name="queue_action"),
    path("history/", views.history, name="history"),
    path("limits/", limits.limits, name="limits"),
    re_path(rf"^limits/{LIMITER}/$", limits.limiter, name="limiter"),
    re_path(rf"^limits/{LIMITER}/action$", limits.limiter_action, name="limiter_action"),
    path("metrics/", metrics.metrics_classes, name="metrics"),
    path("metrics/queues/", metrics.metrics_queues, name="metrics_queues"),
    # Any class name, "/" included (a payload's class is free text); over 200 characters is a 404.
    re_path(r"^metrics/class/(?P<name>.{1,200})/$", metrics.metrics_class, name="metrics_class"),
    path("batches/", batches.batches, name="batches"),
    re_path(rf"^batches/{BID}/$", batches.batch, name="batch"),
    re_path(rf"^batches/{BID}/action$", batches.batch_action, name="batch_action"),
    path("locks/", locks.locks, name="locks"),
    path("locks/action", locks.lock_action, name="lock_action"),
    path("periodic/", periodic.periodic_list, name="periodic"),
    re_path(rf"^periodic/{PERIODIC_ENTRY}/$", periodic.periodic_entry, name="periodic_entry"),
    re_path(rf"^periodic/{PERIODIC_ENTRY}/action$", periodic.periodic_action, name="periodic_action"),
    path("<djwork_set:kind>/", views.set_list, name="set"),
    path("<djwork_set:kind>/action", views.set_action, name="set_action"),
    path("<djwork_set:kind>/<path:address>/", views.set_entry, name="set_entry"),
]
