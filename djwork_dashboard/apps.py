from django.apps import AppConfig


class DjworkDashboardConfig(AppConfig):
    name = "djwork_dashboard"
    verbose_name = "djwork"
    default_auto_field = "django.db.models.AutoField"
