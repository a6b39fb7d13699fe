"""settings.DJWORK -> one typed, cached Config.

Settings are read at call time through ``get_config()`` and the cache is
cleared on ``setting_changed``, so ``override_settings`` works and nothing is
bound at import time (the django-rq #208 failure in STYLE-ANCHORS.md).
Validation lives in ``checks.py``; this module only parses, and parses
leniently, so a bad value becomes a system-check error with a hint instead of
an exception at import.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from typing import Any

from django.conf import settings
from django.core.signals import setting_changed

DEFAULTS: dict[str, Any] = {
    "REDIS_URL": "redis://localhost:6379/0",
    "CACHE": None,
    "REDIS_OPTIONS": {},
    "CONCURRENCY": 10,
    "QUEUES": ["default"],
    "CAPSULES": {},
    "TIMEOUT": 25,
    "FETCH": "reliable",
    "CONNECT_TIMEOUT": 1.0,
    "SOCKET_TIMEOUT": 2.5,
    "POOL_SIZE": None,
    "POOL_TIMEOUT": 1.0,
    "REDIS_MAX_ATTEMPTS": 4,
    "REDIS_BACKOFF_BASE": 0.05,
    "REDIS_BACKOFF_CAP": 2.0,
    "REDIS_EVENT_HOOK": None,
    "HEARTBEAT_INTERVAL": 10.0,
    "ORPHAN_THRESHOLD": 60.0,
    "MAX_ORPHANINGS": 3,
    "REAPER_INTERVAL": 30.0,
    "POLL_INTERVAL_AVERAGE": None,
    "AVERAGE_SCHEDULED_POLL_INTERVAL": 5.0,
    "MAX_RETRIES": 25,
    "DEAD_MAX_JOBS": 10_000,
    "DEAD_TIMEOUT": 180 * 24 * 3600,
    "HISTORY_MAX_LENGTH": 10_000,
    "RESULT_TTL": 24 * 3600,
    "CLIENT_MIDDLEWARE": [],
    "SERVER_MIDDLEWARE": [],
    "ALIASES": {},
    "STRICT_ARGS": True,
    "TAG": "",
    "LABELS": [],
    "LOG_JOBS": True,
    "FETCH_TIMEOUT": 2.0,
    "UNKNOWN_CLASS": "dead",
    "HEALTH_PORT": None,
    "HEALTH_HOST": "0.0.0.0",
}


@dataclass(frozen=True)
class Capsule:
    """A named group of queues with its own processor threads (Sidekiq 7)."""

    name: str
    concurrency: int
    queues: tuple[tuple[str, int], ...]

    @property
    def queue_names(self) -> list[str]:
        return [name for name, _weight in self.queues]

    @property
    def weighted(self) -> bool:
        """Weights given -> random weighted order per fetch; none -> strict order."""
        return any(weight > 0 for _name, weight in self.queues)


@dataclass(frozen=True, eq=False)
class Config:
    redis_url: str
    cache: str | None
    redis_options: dict[str, Any]
    concurrency: int
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
    dead_max_jobs: int
    dead_timeout: float
    history_max_length: int
    result_ttl: int
    client_middleware: tuple[Any, ...]
    server_middleware: tuple[Any, ...]
    aliases: dict[str, str]
    strict_args: bool
    tag: str
    labels: tuple[str, ...]
    log_jobs: bool
    fetch_timeout: float
    unknown_class: str
    health_port: int | None
    raw: dict[str, Any] = field(default_factory=dict, compare=False, repr=False)

    @property
    def queue_names(self) -> list[str]:
        names: list[str] = []
        for capsule in self.capsules:
            for name in capsule.queue_names:
                if name not in names:
                    names.append(name)
        return names


def parse_queue(entry: Any) -> tuple[str, int]:
    """'name', ('name', weight), ['name', weight] or 'name,weight' -> (name, weight)."""
    if isinstance(entry, str):
        if "," in entry:
            name, _, weight = entry.partition(",")
            return name.strip(), int(weight)
        return entry, 0
    if isinstance(entry, (tuple, list)) and len(entry) == 2:
        name, weight = entry
        if not isinstance(name, str) or isinstance(weight, bool) or not isinstance(weight, int):
            raise ValueError(f"queue entry {entry!r} must be (name: str, weight: int)")
        return name, weight
    raise ValueError(f"queue entry {entry!r} must be a name or a (name, weight) pair")


def parse_queues(entries: Any) -> tuple[tuple[str, int], ...]:
    if isinstance(entries, str) or not isinstance(entries, (list, tuple)):
        raise ValueError("QUEUES must be a list of names or (name, weight) pairs")
    return tuple(parse_queue(entry) for entry in entries)


def user_settings() -> dict[str, Any]:
    value = getattr(settings, "DJWORK", {})
    return dict(value) if isinstance(value, dict) else {}


def _number(value: Any, default: float) -> float:
    try:
        return float(value)
    except (TypeError, ValueError):
        return default


def _integer(value: Any, default: int) -> int:
    if isinstance(value, bool):
        return default
    try:
        return int(value)
    except (TypeError, ValueError):
        return default


def _sequence(value: Any) -> tuple[Any, ...]:
    if isinstance(value, (list, tuple)):
        return tuple(value)
    return ()


def _mapping(value: Any) -> dict[str, Any]:
    return dict(value) if isinstance(value, dict) else {}


def build_config(overrides: dict[str, Any] | None = None) -> Config:
    """Merge DEFAULTS, settings.DJWORK and ``overrides``; bad values fall back to defaults.

    The checks framework reports the bad values; falling back here keeps
    ``manage.py check`` itself from crashing before it can report them.
    """
    raw = {**DEFAULTS, **user_settings(), **(overrides or {})}
    try:
        queues = parse_queues(raw["QUEUES"])
    except (ValueError, TypeError):
        queues = (("default", 0),)
    concurrency = max(1, _integer(raw["CONCURRENCY"], 10))
    capsules = [Capsule("default", concurrency, queues)]
    for name, spec in (raw.get("CAPSULES") or {}).items() if isinstance(raw.get("CAPSULES"), dict) else []:
        try:
            capsules.append(Capsule(
                str(name),
                max(1, _integer(spec.get("CONCURRENCY", 1), 1)),
                parse_queues(spec.get("QUEUES", [])),
            ))
        except (ValueError, TypeError, AttributeError):
            continue
    return Config(
        redis_url=str(raw["REDIS_URL"]),
        cache=raw["CACHE"],
        redis_options=_mapping(raw["REDIS_OPTIONS"]),
        concurrency=concurrency,
        queues=queues,
        capsules=tuple(capsules),
        timeout=_number(raw["TIMEOUT"], 25.0),
        fetch=str(raw["FETCH"]),
        connect_timeout=_number(raw["CONNECT_TIMEOUT"], 1.0),
        socket_timeout=_number(raw["SOCKET_TIMEOUT"], 2.5),
        pool_size=raw["POOL_SIZE"] if isinstance(raw["POOL_SIZE"], int) else None,
        pool_timeout=_number(raw["POOL_TIMEOUT"], 1.0),
        redis_max_attempts=max(1, _integer(raw["REDIS_MAX_ATTEMPTS"], 4)),
        redis_backoff_base=_number(raw["REDIS_BACKOFF_BASE"], 0.05),
        redis_backoff_cap=_number(raw["REDIS_BACKOFF_CAP"], 2.0),
        redis_event_hook=raw["REDIS_EVENT_HOOK"],
        heartbeat_interval=_number(raw["HEARTBEAT_INTERVAL"], 10.0),
        orphan_threshold=_number(raw["ORPHAN_THRESHOLD"], 60.0),
        max_orphanings=_integer(raw["MAX_ORPHANINGS"], 3),
        reaper_interval=_number(raw["REAPER_INTERVAL"], 30.0),
        poll_interval_average=(
            None if raw["POLL_INTERVAL_AVERAGE"] is None else _number(raw["POLL_INTERVAL_AVERAGE"], 5.0)
        ),
        average_scheduled_poll_interval=_number(raw["AVERAGE_SCHEDULED_POLL_INTERVAL"], 5.0),
        max_retries=_integer(raw["MAX_RETRIES"], 25),
        dead_max_jobs=_integer(raw["DEAD_MAX_JOBS"], 10_000),
        dead_timeout=_number(raw["DEAD_TIMEOUT"], 180 * 24 * 3600),
        history_max_length=_integer(raw["HISTORY_MAX_LENGTH"], 10_000),
        result_ttl=_integer(raw["RESULT_TTL"], 24 * 3600),
        client_middleware=_sequence(raw["CLIENT_MIDDLEWARE"]),
        server_middleware=_sequence(raw["SERVER_MIDDLEWARE"]),
        aliases=_mapping(raw["ALIASES"]),
        strict_args=bool(raw["STRICT_ARGS"]),
        tag=str(raw["TAG"] or ""),
        labels=tuple(str(label) for label in _sequence(raw["LABELS"])),
        log_jobs=bool(raw["LOG_JOBS"]),
        fetch_timeout=_number(raw["FETCH_TIMEOUT"], 2.0),
        unknown_class="retry" if raw["UNKNOWN_CLASS"] == "retry" else "dead",
        health_port=raw["HEALTH_PORT"] if _integer(raw["HEALTH_PORT"], 0) > 0 else None,
        raw=raw,
    )


@functools.lru_cache(maxsize=1)
def get_config() -> Config:
    return build_config()


def _clear_config(*, setting: str, **_kwargs: Any) -> None:
    if setting in ("DJWORK", "CACHES"):
        get_config.cache_clear()
        from djwork import redis as redis_layer

        redis_layer.reset()


setting_changed.connect(_clear_config, dispatch_uid="djwork.conf.clear")
