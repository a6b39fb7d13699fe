from django.apps import AppConfig


class DjworkConfig(AppConfig):
    name = "djwork"
    verbose_name = "djwork"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        # Registers the system checks and the ALWAYS_EAGER runner; nothing here touches Redis.
        from djwork.settings import checks  # noqa: F401
        from djwork.testing import modes  # noqa: F401  (registers the ALWAYS_EAGER runner)
