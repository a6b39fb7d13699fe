"""``task.app``: the part of Celery's app a task's code reads, its ``conf``.

djwork has no app object: one process, one ``settings.DJWORK``. Code written for Celery reads and writes
``self.app.conf.task_always_eager`` (a test turning eager mode on around a call, a task checking it), so
``app.conf`` answers Celery's names for the settings djwork has under the same meaning, by reading the
current ``Config``; assigning one sets its ``DJWORK`` key (through from_celery.py's conversion and checks)
and sends ``setting_changed``, as ``override_settings`` does, so every reader sees it at once. A Celery name
djwork has no such setting for raises AttributeError naming the ones it has. docs/celery.md, Settings.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core.signals import setting_changed

from djwork.settings import from_celery
from djwork.settings.conf import get_config

__all__ = ["App", "Conf", "current_app"]  # current_app: the one App, every task.app

# Celery's name -> the Config attribute holding the same value (the DJWORK key is from_celery.MAPPED's).
READABLE = {
    "task_always_eager": "always_eager",
    "task_allow_error_cb_on_chord_header": "chord_header_errbacks",
    "task_track_started": "track_started",
    "task_default_queue": "default_queue",
    "task_soft_time_limit": "soft_time_limit",
    "task_time_limit": "time_limit",
    "worker_concurrency": "concurrency",
}


class Conf:
    """``app.conf``: Celery's names of the settings djwork has (``READABLE``), read and written live."""

    def __getattr__(self, name: str) -> Any:
        attribute = READABLE.get(name)
        if attribute is None:
            raise AttributeError(f"app.conf.{name}: djwork has no setting of Celery's name {name!r} to read "
                                 f"here; these it has: {', '.join(sorted(READABLE))} (docs/celery.md, Settings)")
        return getattr(get_config(), attribute)

    def __setattr__(self, name: str, value: Any) -> None:
        if name not in READABLE:
            raise AttributeError(f"app.conf.{name}: djwork has no setting of Celery's name {name!r} to set "
                                 f"here; these it has: {', '.join(sorted(READABLE))} (docs/celery.md, Settings)")
        key, convert = from_celery.MAPPED[name]
        try:
            converted = convert(value)
        except (ValueError, TypeError) as error:
            raise ValueError(f"app.conf.{name} = {value!r}: {error}") from None
        # As override_settings does: the new DJWORK, then the signal that drops the cached Config.
        settings.DJWORK = {**getattr(settings, "DJWORK", {}), key: converted}
        setting_changed.send(sender=type(self), setting="DJWORK", value=settings.DJWORK, enter=True)

    def __repr__(self) -> str:
        return f"<djwork app.conf: {', '.join(sorted(READABLE))}>"


class App:
    """Celery's app, as far as djwork has one: ``conf``."""

    def __init__(self) -> None:
        self.conf = Conf()

    def __repr__(self) -> str:
        return "<djwork app>"


current_app = App()
