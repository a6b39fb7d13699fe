"""System checks: every bad ``settings.DJWORK`` value becomes an error with a hint.

Ids are stable (``djwork.E001``...) and documented in docs/settings.md.
"""

from __future__ import annotations

import re
from typing import Any
from urllib.parse import urlparse

from django.conf import settings
from django.core.checks import Error, Tags, Warning, register
from django.utils.module_loading import import_string

from djwork.conf import DEFAULTS, parse_queues, user_settings

QUEUE_NAME = re.compile(r"\A[a-z_:.\-0-9]+\Z", re.IGNORECASE)
URL_SCHEMES = ("redis", "rediss", "unix")

POSITIVE_NUMBERS = {
    "TIMEOUT": ("djwork.E006", "seconds running jobs get to finish on shutdown, e.g. 25", True),
    "CONNECT_TIMEOUT": ("djwork.E010", "seconds, e.g. 1", False),
    "SOCKET_TIMEOUT": ("djwork.E010", "seconds, e.g. 2.5", False),
    "POOL_TIMEOUT": ("djwork.E010", "seconds, e.g. 1", False),
    "REDIS_BACKOFF_BASE": ("djwork.E010", "seconds, e.g. 0.05", False),
    "REDIS_BACKOFF_CAP": ("djwork.E010", "seconds, e.g. 2", False),
    "HEARTBEAT_INTERVAL": ("djwork.E010", "seconds between beats, e.g. 10", False),
    "ORPHAN_THRESHOLD": ("djwork.E010", "seconds without a heartbeat before jobs are recovered, e.g. 60",
                         False),
    "REAPER_INTERVAL": ("djwork.E010", "seconds between orphan checks, e.g. 30", False),
    "AVERAGE_SCHEDULED_POLL_INTERVAL": ("djwork.E010", "seconds, e.g. 5", False),
    "DEAD_TIMEOUT": ("djwork.E010", "seconds a dead job is kept, e.g. 15552000 (180 days)", False),
    "FETCH_TIMEOUT": ("djwork.E010", "seconds a blocking fetch waits, e.g. 2", False),
}
POSITIVE_INTEGERS = {
    "CONCURRENCY": ("djwork.E004", "processor threads per process, e.g. 10"),
    "MAX_ORPHANINGS": ("djwork.E011", "recoveries before a job is sent to dead, e.g. 3"),
    "DEAD_MAX_JOBS": ("djwork.E011", "size cap of the dead set, e.g. 10000"),
    "HISTORY_MAX_LENGTH": ("djwork.E011", "entries kept in the history stream, e.g. 10000"),
    "RESULT_TTL": ("djwork.E011", "seconds a task result is kept, e.g. 86400"),
    "REDIS_MAX_ATTEMPTS": ("djwork.E011", "tries of an idempotent Redis block, e.g. 4"),
}


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def check_redis_url(url: Any) -> list[Error]:
    hint = "Use redis://[:password@]host:port/db, rediss://... for TLS, or unix:///path/redis.sock?db=0."
    if not isinstance(url, str):
        return [Error(f"DJWORK['REDIS_URL'] must be a string, got {type(url).__name__}.", hint=hint,
                      id="djwork.E002")]
    try:
        parsed = urlparse(url)
        port = parsed.port
    except ValueError as error:
        return [Error(f"DJWORK['REDIS_URL'] {url!r} can't be parsed: {error}.", hint=hint, id="djwork.E002")]
    if parsed.scheme not in URL_SCHEMES:
        return [Error(f"DJWORK['REDIS_URL'] {url!r} has scheme {parsed.scheme!r}.", hint=hint,
                      id="djwork.E002")]
    if parsed.scheme != "unix" and not parsed.hostname:
        return [Error(f"DJWORK['REDIS_URL'] {url!r} names no host.", hint=hint, id="djwork.E002")]
    db = parsed.path.lstrip("/")
    if parsed.scheme != "unix" and db and not db.isdigit():
        return [Error(f"DJWORK['REDIS_URL'] {url!r}: database {db!r} is not a number.", hint=hint,
                      id="djwork.E002")]
    del port
    return []


def check_cache(alias: Any) -> list[Error]:
    caches = getattr(settings, "CACHES", {})
    if not isinstance(alias, str) or alias not in caches:
        return [Error(f"DJWORK['CACHE'] names cache {alias!r}, which is not in settings.CACHES.",
                      hint=f"Use one of {sorted(caches)} or remove CACHE and set REDIS_URL.",
                      id="djwork.E003")]
    backend = str(caches[alias].get("BACKEND", ""))
    if "redis" not in backend.lower():
        return [Error(f"DJWORK['CACHE'] = {alias!r} is a {backend}, not a Redis cache.",
                      hint="Point CACHE at a django_redis.cache.RedisCache (or Django's RedisCache) alias.",
                      id="djwork.E003")]
    location = caches[alias].get("LOCATION")
    if isinstance(location, (list, tuple)):
        location = location[0] if location else None
    return check_redis_url(location)


def check_queue_list(value: Any, where: str) -> list[Error]:
    hint = ('Give names, or (name, weight) pairs with integer weights >= 0: '
            '["critical", "default"] or [("critical", 3), ("default", 1)].')
    try:
        queues = parse_queues(value)
    except (ValueError, TypeError) as error:
        return [Error(f"{where}: {error}.", hint=hint, id="djwork.E005")]
    errors = []
    if not queues:
        errors.append(Error(f"{where} is empty; a worker needs at least one queue.", hint=hint,
                            id="djwork.E005"))
    for name, weight in queues:
        if not QUEUE_NAME.match(name):
            errors.append(Error(f"{where}: queue name {name!r} has characters outside [a-z0-9_:.-].",
                                hint="Sidekiq's Web UI and djwork's dashboard only address such names.",
                                id="djwork.E005"))
        if weight < 0:
            errors.append(Error(f"{where}: queue {name!r} has weight {weight}.", hint=hint, id="djwork.E005"))
    return errors


def check_importables(key: str, value: Any) -> list[Error]:
    if not isinstance(value, (list, tuple)):
        return [Error(f"DJWORK[{key!r}] must be a list of dotted paths or callables.",
                      hint="e.g. ['myapp.middleware.Tracing']", id="djwork.E008")]
    errors = []
    for entry in value:
        if isinstance(entry, str):
            try:
                import_string(entry)
            except ImportError as error:
                errors.append(Error(f"DJWORK[{key!r}]: {entry!r} can't be imported: {error}.",
                                    hint="Check the dotted path.", id="djwork.E008"))
        elif not callable(entry):
            errors.append(Error(f"DJWORK[{key!r}]: {entry!r} is not callable.", hint="", id="djwork.E008"))
    return errors


@register(Tags.compatibility, "djwork")
def check_settings(app_configs: Any = None, **kwargs: Any) -> list[Error | Warning]:
    raw = getattr(settings, "DJWORK", {})
    if not isinstance(raw, dict):
        return [Error("settings.DJWORK must be a dict.", hint="DJWORK = {'REDIS_URL': 'redis://...'}",
                      id="djwork.E000")]
    values = {**DEFAULTS, **user_settings()}
    errors: list[Error | Warning] = []
    for key in raw:
        if key not in DEFAULTS:
            close = [known for known in DEFAULTS if known.replace("_", "") == str(key).upper().replace("_", "")]
            errors.append(Error(f"DJWORK has an unknown key {key!r}.",
                                hint=f"Did you mean {close[0]!r}?" if close else
                                f"Known keys: {', '.join(sorted(DEFAULTS))}.",
                                id="djwork.E001"))
    if values["CACHE"] is not None:
        errors += check_cache(values["CACHE"])
        if "REDIS_URL" in raw:
            errors.append(Warning("DJWORK sets both CACHE and REDIS_URL; CACHE wins.",
                                  hint="Remove one of them.", id="djwork.W001"))
    else:
        errors += check_redis_url(values["REDIS_URL"])
    for key, (check_id, hint) in POSITIVE_INTEGERS.items():
        value = values[key]
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            errors.append(Error(f"DJWORK[{key!r}] must be an integer >= 1, got {value!r}.", hint=hint,
                                id=check_id))
    for key, (check_id, hint, zero_ok) in POSITIVE_NUMBERS.items():
        value = values[key]
        if not _is_number(value) or value < 0 or (value == 0 and not zero_ok):
            errors.append(Error(f"DJWORK[{key!r}] must be a positive number, got {value!r}.", hint=hint,
                                id=check_id))
    errors += check_queue_list(values["QUEUES"], "DJWORK['QUEUES']")
    capsules = values["CAPSULES"]
    if not isinstance(capsules, dict):
        errors.append(Error("DJWORK['CAPSULES'] must be a dict of name -> {'QUEUES': [...], 'CONCURRENCY': n}.",
                            hint="e.g. {'single': {'QUEUES': ['serial'], 'CONCURRENCY': 1}}", id="djwork.E009"))
    else:
        for name, spec in capsules.items():
            if name == "default" or not isinstance(spec, dict):
                errors.append(Error(f"DJWORK['CAPSULES'][{name!r}] must be a dict and not be named 'default'.",
                                    hint="e.g. {'QUEUES': ['serial'], 'CONCURRENCY': 1}", id="djwork.E009"))
                continue
            errors += check_queue_list(spec.get("QUEUES"), f"DJWORK['CAPSULES'][{name!r}]['QUEUES']")
            concurrency = spec.get("CONCURRENCY", 1)
            if not isinstance(concurrency, int) or isinstance(concurrency, bool) or concurrency < 1:
                errors.append(Error(f"DJWORK['CAPSULES'][{name!r}]['CONCURRENCY'] must be an integer >= 1.",
                                    hint="e.g. 1 for a serial queue", id="djwork.E009"))
    if values["FETCH"] not in ("reliable", "basic"):
        errors.append(Error(f"DJWORK['FETCH'] must be 'reliable' or 'basic', got {values['FETCH']!r}.",
                            hint="'reliable' (the default) never loses a job when a worker dies.",
                            id="djwork.E007"))
    errors += check_importables("CLIENT_MIDDLEWARE", values["CLIENT_MIDDLEWARE"])
    errors += check_importables("SERVER_MIDDLEWARE", values["SERVER_MIDDLEWARE"])
    hook = values["REDIS_EVENT_HOOK"]
    if hook is not None:
        errors += check_importables("REDIS_EVENT_HOOK", [hook])
    aliases = values["ALIASES"]
    if not isinstance(aliases, dict) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in aliases.items()):
        errors.append(Error("DJWORK['ALIASES'] must map names (e.g. a Ruby class name) to dotted paths.",
                            hint="e.g. {'HardWorker': 'myapp.tasks.hard_work'}", id="djwork.E012"))
    if (_is_number(values["ORPHAN_THRESHOLD"]) and _is_number(values["HEARTBEAT_INTERVAL"])
            and values["ORPHAN_THRESHOLD"] <= 2 * values["HEARTBEAT_INTERVAL"]):
        errors.append(Error(
            f"DJWORK['ORPHAN_THRESHOLD'] ({values['ORPHAN_THRESHOLD']}) must exceed twice HEARTBEAT_INTERVAL "
            f"({values['HEARTBEAT_INTERVAL']}).",
            hint="A live process that missed one beat would otherwise have its running jobs recovered "
                 "and run twice.", id="djwork.E013"))
    pool_size = values["POOL_SIZE"]
    if pool_size is not None and (not isinstance(pool_size, int) or isinstance(pool_size, bool) or pool_size < 2):
        errors.append(Error(f"DJWORK['POOL_SIZE'] must be None or an integer >= 2, got {pool_size!r}.",
                            hint="None sizes the pools from CONCURRENCY.", id="djwork.E014"))
    return errors
