"""Dashboard views: thin, staff-only, reading through djwork.api (never raw Redis)."""

from djwork_dashboard.views.busy import busy, busy_action
from djwork_dashboard.views.history import history
from djwork_dashboard.views.overview import overview, stats_json
from djwork_dashboard.views.queues import queue, queue_action, queues
from djwork_dashboard.views.sets import set_action, set_entry, set_list

__all__ = ["busy", "busy_action", "history", "overview", "queue", "queue_action", "queues", "set_action",
           "set_entry", "set_list", "stats_json"]
