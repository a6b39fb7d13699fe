"""System checks: every bad ``settings.DJWORK`` value becomes an error with a hint.

Each key's check, id and hint are in its spec (djwork.settings.table); this
module adds the two checks about the dict itself (E000, E001) and registers
the whole with Django. Ids are stable and documented in docs/settings.md; a
new check gets a new id, an existing id is never reused for another meaning.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core.checks import CheckMessage, Error, Tags, register

from djwork.settings import from_celery as celery_settings
from djwork.settings.conf import user_settings
from djwork.settings.kinds import QUEUE_NAME
from djwork.settings.table import DEFAULTS, SETTINGS
from djwork.settings.value_checks import suggest

__all__ = ["QUEUE_NAME", "check_celery_settings", "check_job_options", "check_settings"]


@register(Tags.compatibility, "djwork")
def check_settings(app_configs: Any = None, **kwargs: Any) -> list[CheckMessage]:
    given = getattr(settings, "DJWORK", {})
    if not isinstance(given, dict):
        return [Error(f"settings.DJWORK must be a dict, got {type(given).__name__}.",
                      hint="DJWORK = {'REDIS_URL': 'redis://...'}", id="djwork.E000")]
    errors: list[CheckMessage] = []
    for key in given:
        if key not in DEFAULTS:
            close = suggest(str(key), DEFAULTS)
            errors.append(Error(f"DJWORK has an unknown key {key!r}.",
                                hint=f"Did you mean {close!r}?" if close else
                                f"Known keys: {', '.join(sorted(DEFAULTS))}.",
                                id="djwork.E001"))
    values = {**DEFAULTS, **user_settings()}
    for spec in SETTINGS:
        errors += spec.check(spec, values, given)
    return errors


@register(Tags.compatibility, "djwork")
def check_celery_settings(app_configs: Any = None, **kwargs: Any) -> list[CheckMessage]:
    """Every CELERY_* setting djwork does not read, or can't use, is a warning (djwork/settings/from_celery.py)."""
    return celery_settings.check()


@register(Tags.compatibility, "djwork")
def check_job_options(app_configs: Any = None, **kwargs: Any) -> list[CheckMessage]:
    """Each declared job whose soft_time_limit is past its time_limit (declaring it is allowed, as in Celery;
    every call of it raises). The apps' tasks and jobs modules are imported first, as a worker does."""
    from django.utils.module_loading import autodiscover_modules

    from djwork import options
    from djwork.jobs import registry

    autodiscover_modules("tasks", "jobs")
    misordered = sorted((name, job) for name, job in registry.items()
                        if options.time_limits_misordered(getattr(job, "options", None) or {}))
    return [Error(f"{name}: soft_time_limit ({job.options['soft_time_limit']!r}) is past time_limit "
                  f"({job.options['time_limit']!r}): every call of it raises ValueError.",
                  hint="The soft limit is the job's warning to clean up before the hard limit ends it: make "
                       "soft_time_limit less than or equal to time_limit, or drop one of them.",
                  obj=job, id="djwork.E075")
            for name, job in misordered]
