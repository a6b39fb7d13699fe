"""System checks: every bad ``settings.DJWORK`` value becomes an error with a hint.

Ids are stable (``djwork.E001``...) and documented in docs/settings.md; a new
check gets a new id, an existing id is never reused for another meaning.
"""

from __future__ import annotations

import difflib
import re
from typing import Any
from urllib.parse import parse_qs, urlparse

from django.conf import settings
from django.core.checks import Error, Tags, Warning, register
from django.utils.module_loading import import_string

from djwork.conf import DEFAULTS, parse_queues, user_settings

QUEUE_NAME = re.compile(r"\A[a-z_:.\-0-9]+\Z", re.IGNORECASE)
URL_SCHEMES = ("redis", "rediss", "unix")
CAPSULE_KEYS = ("QUEUES", "CONCURRENCY")

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
BOOLEANS = {
    "STRICT_ARGS": "True rejects job arguments that don't survive a JSON round trip (Sidekiq's strict_args!).",
    "LOG_JOBS": "True logs a start and a done/fail line per job.",
}


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _is_integer(value: Any) -> bool:
    # bool is an int subclass; CONCURRENCY=True is a typo, not 1.
    return isinstance(value, int) and not isinstance(value, bool)


def _suggest(word: str, choices: Any) -> str | None:
    """The closest known name to a misspelt or lowercase one, if any is close."""
    normal = word.upper()
    matches = difflib.get_close_matches(normal, list(choices), n=1, cutoff=0.75)
    return matches[0] if matches else None


def check_redis_url(url: Any, what: str = "DJWORK['REDIS_URL']") -> list[Error]:
    hint = "Use redis://[:password@]host:port/db, rediss://... for TLS, or unix:///path/redis.sock?db=0."

    def error(problem: str) -> list[Error]:
        return [Error(f"{what} {problem}", hint=hint, id="djwork.E002")]

    if not isinstance(url, str):
        return error(f"must be a string, got {type(url).__name__}.")
    try:
        parsed = urlparse(url)
        parsed.port  # noqa: B018 - the property is what validates the port (digits, 0-65535)
    except ValueError as problem:
        return error(f"{url!r} can't be parsed: {problem}.")
    if parsed.scheme not in URL_SCHEMES:
        return error(f"{url!r} has scheme {parsed.scheme!r}, not one of {', '.join(URL_SCHEMES)}.")
    if parsed.scheme == "unix":
        if not parsed.path:
            return error(f"{url!r} names no socket path.")
    elif not parsed.hostname:
        return error(f"{url!r} names no host.")
    db = parsed.path.lstrip("/") if parsed.scheme != "unix" else ""
    if db and not db.isdigit():
        return error(f"{url!r}: database {db!r} is not a number.")
    # redis-py also reads ?db=N, for every scheme, and int()s it when the pool is built.
    for query_db in parse_qs(parsed.query).get("db", []):
        if not query_db.isdigit():
            return error(f"{url!r}: database {query_db!r} is not a number.")
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
    if not location:
        return [Error(f"settings.CACHES[{alias!r}] has no LOCATION, so djwork can't tell which Redis to use.",
                      hint="Set LOCATION to a redis:// URL, or remove CACHE and set REDIS_URL.",
                      id="djwork.E003")]
    return check_redis_url(location, f"settings.CACHES[{alias!r}]['LOCATION'] (used via DJWORK['CACHE'])")


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
            errors.append(Error(f"{where}: queue name {name!r} is empty or has characters outside [a-z0-9_:.-].",
                                hint="Sidekiq's Web UI and djwork's dashboard only address such names.",
                                id="djwork.E005"))
        if weight < 0:
            errors.append(Error(f"{where}: queue {name!r} has weight {weight}.", hint=hint, id="djwork.E005"))
    return errors


def check_importables(key: str, value: Any) -> list[Error]:
    hint = "Give a dotted path to a class or function (e.g. 'myapp.middleware.Tracing') or the object itself."
    if not isinstance(value, (list, tuple)):
        return [Error(f"DJWORK[{key!r}] must be a list of dotted paths or callables.",
                      hint="e.g. ['myapp.middleware.Tracing']", id="djwork.E008")]
    errors = []
    for entry in value:
        if isinstance(entry, str):
            try:
                entry_object = import_string(entry)
            except Exception as error:  # a module that fails at import must be reported, not crash `check`
                errors.append(Error(f"DJWORK[{key!r}]: {entry!r} can't be imported: {error}.",
                                    hint=f"Check the dotted path. {hint}", id="djwork.E008"))
                continue
        else:
            entry_object = entry
        if not callable(entry_object):
            errors.append(Error(f"DJWORK[{key!r}]: {entry!r} is not callable.", hint=hint, id="djwork.E008"))
    return errors


def check_capsules(capsules: Any) -> list[Error]:
    example = "e.g. {'single': {'QUEUES': ['serial'], 'CONCURRENCY': 1}}"
    if not isinstance(capsules, dict):
        return [Error("DJWORK['CAPSULES'] must be a dict of name -> {'QUEUES': [...], 'CONCURRENCY': n}.",
                      hint=example, id="djwork.E009")]
    errors = []
    for name, spec in capsules.items():
        where = f"DJWORK['CAPSULES'][{name!r}]"
        if not isinstance(name, str) or not QUEUE_NAME.match(name) or name == "default":
            # 'default' is the capsule built from the top-level QUEUES/CONCURRENCY.
            errors.append(Error(f"{where}: capsule names must be non-empty [a-z0-9_:.-] strings other than "
                                "'default'.", hint=example, id="djwork.E009"))
            continue
        if not isinstance(spec, dict):
            errors.append(Error(f"{where} must be a dict, got {type(spec).__name__}.", hint=example,
                                id="djwork.E009"))
            continue
        for key in spec:
            if key not in CAPSULE_KEYS:
                close = _suggest(str(key), CAPSULE_KEYS)
                errors.append(Error(f"{where} has an unknown key {key!r}.",
                                    hint=f"Did you mean {close!r}?" if close else
                                    f"A capsule takes only {', '.join(CAPSULE_KEYS)}.", id="djwork.E009"))
        errors += check_queue_list(spec.get("QUEUES"), f"{where}['QUEUES']")
        concurrency = spec.get("CONCURRENCY", 1)
        if not _is_integer(concurrency) or concurrency < 1:
            errors.append(Error(f"{where}['CONCURRENCY'] must be an integer >= 1, got {concurrency!r}.",
                                hint="e.g. 1 for a serial queue", id="djwork.E009"))
    return errors


@register(Tags.compatibility, "djwork")
def check_settings(app_configs: Any = None, **kwargs: Any) -> list[Error | Warning]:
    raw = getattr(settings, "DJWORK", {})
    if not isinstance(raw, dict):
        return [Error(f"settings.DJWORK must be a dict, got {type(raw).__name__}.",
                      hint="DJWORK = {'REDIS_URL': 'redis://...'}", id="djwork.E000")]
    values = {**DEFAULTS, **user_settings()}
    errors: list[Error | Warning] = []
    for key in raw:
        if key not in DEFAULTS:
            close = _suggest(str(key), DEFAULTS)
            errors.append(Error(f"DJWORK has an unknown key {key!r}.",
                                hint=f"Did you mean {close!r}?" if close else
                                f"Known keys: {', '.join(sorted(DEFAULTS))}.",
                                id="djwork.E001"))
    if values["CACHE"] is not None:
        errors += check_cache(values["CACHE"])
        if "REDIS_URL" in raw:
            errors.append(Warning("DJWORK sets both CACHE and REDIS_URL; CACHE wins.",
                                  hint="Remove one of them.", id="djwork.W001"))
    else:
        errors += check_redis_url(values["REDIS_URL"])
    options = values["REDIS_OPTIONS"]
    if not isinstance(options, dict) or not all(isinstance(key, str) for key in options):
        errors.append(Error(f"DJWORK['REDIS_OPTIONS'] must be a dict of redis-py connection keyword arguments, "
                            f"got {options!r}.", hint="e.g. {'ssl_cert_reqs': 'required'}", id="djwork.E019"))
    for key, (check_id, hint) in POSITIVE_INTEGERS.items():
        value = values[key]
        if not _is_integer(value) or value < 1:
            errors.append(Error(f"DJWORK[{key!r}] must be an integer >= 1, got {value!r}.", hint=hint,
                                id=check_id))
    if values["UNKNOWN_CLASS"] not in ("dead", "retry"):
        errors.append(Error(f"DJWORK['UNKNOWN_CLASS'] must be 'dead' or 'retry', got {values['UNKNOWN_CLASS']!r}.",
                            hint="'retry' lets a worker that knows the class (e.g. a Ruby Sidekiq process on the same "
                                 "queues) get the job later; 'dead' files it at once.", id="djwork.E021"))
    health_port = values["HEALTH_PORT"]
    if health_port is not None and (not _is_integer(health_port) or not 0 < health_port < 65536):
        errors.append(Error(f"DJWORK['HEALTH_PORT'] must be None or a TCP port, got {health_port!r}.",
                            hint="e.g. 8081; /live and /ready are served there (off when None).", id="djwork.E022"))
    if not isinstance(values["HEALTH_HOST"], str) or not values["HEALTH_HOST"]:
        errors.append(Error(f"DJWORK['HEALTH_HOST'] must be an address string, got {values['HEALTH_HOST']!r}.",
                            hint="'0.0.0.0' (all interfaces, what a kubelet probing the pod IP needs) or '127.0.0.1'.",
                            id="djwork.E023"))
    max_retries = values["MAX_RETRIES"]
    if not _is_integer(max_retries) or max_retries < 0:
        errors.append(Error(f"DJWORK['MAX_RETRIES'] must be an integer >= 0, got {max_retries!r}.",
                            hint="Retries before a failing job goes to the dead set, e.g. 25; 0 disables retries.",
                            id="djwork.E020"))
    for key, (check_id, hint, zero_ok) in POSITIVE_NUMBERS.items():
        value = values[key]
        if not _is_number(value) or value < 0 or (value == 0 and not zero_ok):
            errors.append(Error(f"DJWORK[{key!r}] must be a positive number, got {value!r}.", hint=hint,
                                id=check_id))
    poll = values["POLL_INTERVAL_AVERAGE"]
    if poll is not None and (not _is_number(poll) or poll <= 0):
        errors.append(Error(f"DJWORK['POLL_INTERVAL_AVERAGE'] must be None or a positive number, got {poll!r}.",
                            hint="None scales the scheduler's poll with the number of processes (Sidekiq's "
                                 "default); a number fixes it in seconds.", id="djwork.E018"))
    errors += check_queue_list(values["QUEUES"], "DJWORK['QUEUES']")
    errors += check_capsules(values["CAPSULES"])
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
    if pool_size is not None and (not _is_integer(pool_size) or pool_size < 2):
        errors.append(Error(f"DJWORK['POOL_SIZE'] must be None or an integer >= 2, got {pool_size!r}.",
                            hint="None sizes the pools from CONCURRENCY.", id="djwork.E014"))
    labels = values["LABELS"]
    if not isinstance(labels, (list, tuple)) or not all(isinstance(label, str) for label in labels):
        # A bare string would become one label per character.
        errors.append(Error(f"DJWORK['LABELS'] must be a list of strings, got {labels!r}.",
                            hint="e.g. ['blue', 'eu-west']; shown on the dashboard's process list.",
                            id="djwork.E015"))
    if not isinstance(values["TAG"], str):
        errors.append(Error(f"DJWORK['TAG'] must be a string, got {values['TAG']!r}.",
                            hint="e.g. 'myapp'; shown in the process title and on the dashboard.", id="djwork.E016"))
    for key, hint in BOOLEANS.items():
        if not isinstance(values[key], bool):
            errors.append(Error(f"DJWORK[{key!r}] must be True or False, got {values[key]!r}.", hint=hint,
                                id="djwork.E017"))
    return errors
