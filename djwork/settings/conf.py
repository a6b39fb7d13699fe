"""settings.DJWORK -> one typed, cached Config.

Settings are read at call time through ``get_config()`` and the cache is
cleared on ``setting_changed``, so ``override_settings`` works and nothing is
bound at import time: a value read at import misses every later override
(django-rq #208). Each key is described once, in djwork.settings.table; this
module only parses, and parses leniently, so a bad value becomes a
system-check error with a hint (djwork.settings.checks) instead of an exception at
import. Of djwork it imports only the settings modules (settings_table,
settings_kinds, settings_checks, celery_settings), which import nothing else of djwork, so
every other module can depend on it without a cycle.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.core.signals import setting_changed

from djwork.settings import from_celery as celery_settings
from djwork.settings.kinds import Capsule, parse_queue, parse_queues
from djwork.settings.table import DEFAULTS, SETTINGS

__all__ = ["DEFAULTS", "SETTINGS", "Capsule", "Config", "build_config", "get_config", "parse_queue", "parse_queues",
           "user_settings"]


@dataclass(frozen=True, eq=False)
class Config:
    """The parsed settings: one attribute per key of djwork.settings.table, in lower case."""

    redis_url: str
    cache: str | None
    redis_options: dict[str, Any]
    concurrency: int
    async_concurrency: int
    embedded_yield: float
    embedded_max_jobs_per_second: float | None
    queues: tuple[tuple[str, int], ...]
    capsules: tuple[Capsule, ...]
    timeout: float
    fetch: str
    connect_timeout: float
    socket_timeout: float
    pool_size: int | None
    pool_timeout: float
    redis_max_attempts: int
    redis_backoff_base: float
    redis_backoff_cap: float
    redis_event_hook: Any
    heartbeat_interval: float
    orphan_threshold: float
    max_orphanings: int
    reaper_interval: float
    poll_interval_average: float | None
    average_scheduled_poll_interval: float
    max_retries: int
    failures: str
    routes: dict[str, str]
    default_queue: str
    limiter_max_reschedules: int
    dead_max_jobs: int
    dead_max_bytes: int
    dead_timeout: float
    history_max_length: int
    result_ttl: int
    iterable_checkpoint_items: int
    iterable_checkpoint_seconds: float
    iterable_state_ttl: int
    results: bool
    result_max_bytes: int
    track_started: bool
    client_middleware: tuple[Any, ...]
    server_middleware: tuple[Any, ...]
    aliases: dict[str, str]
    strict_args: bool
    tag: str
    labels: tuple[str, ...]
    log_jobs: bool
    celery_trace_log: bool
    fetch_timeout: float
    unknown_class: str
    health_port: int | None
    health_host: str
    leader: bool
    periodic: tuple[Any, ...]
    metrics: bool
    metrics_token: str | None
    test_clock: Any  # djwork.periodic.clock.Clock
    dashboard_latency_warning: float
    soft_time_limit: float | None
    time_limit: float | None
    always_eager: bool
    chord_header_errbacks: bool

    @property
    def queue_names(self) -> list[str]:
        names: list[str] = []
        for capsule in self.capsules:
            for name in capsule.queue_names:
                if name not in names:
                    names.append(name)
        return names


def user_settings() -> dict[str, Any]:
    value = getattr(settings, "DJWORK", {})
    return dict(value) if isinstance(value, dict) else {}


def build_config(overrides: dict[str, Any] | None = None) -> Config:
    """Merge the defaults, settings.DJWORK and ``overrides``; bad values fall back to defaults.

    The checks framework reports the bad values; falling back here keeps
    ``manage.py check`` itself from crashing before it can report them.
    """
    # A Celery project's CELERY_* settings djwork understands, under DJWORK's own (djwork/settings/from_celery.py).
    raw = {**DEFAULTS, **celery_settings.as_djwork(), **user_settings(), **(overrides or {})}
    values = {spec.attribute: spec.value(raw[spec.name]) for spec in SETTINGS}
    # The top-level QUEUES/CONCURRENCY are the default capsule; CAPSULES holds only the others.
    values["capsules"] = (Capsule("default", values["concurrency"], values["queues"]), *values["capsules"])
    return Config(**values)


@functools.lru_cache(maxsize=1)
def get_config() -> Config:
    return build_config()


def _clear_config(*, setting: str, **_kwargs: Any) -> None:
    # CACHES too: a CACHE alias's LOCATION is part of the config. djwork.redis
    # drops its pools on the same signal itself: importing it here would make
    # conf and redis depend on each other.
    if setting in ("DJWORK", "CACHES") or setting.startswith(celery_settings.PREFIX):
        get_config.cache_clear()


setting_changed.connect(_clear_config, dispatch_uid="djwork.settings.conf.clear")
