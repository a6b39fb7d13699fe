from django.apps import AppConfig


class DjworkConfig(AppConfig):
    name = "djwork"
    verbose_name = "djwork"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        # Registers the system checks; nothing here touches Redis.
        from djwork import checks  # noqa: F401
