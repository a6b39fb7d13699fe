"""A Celery project's ``CELERY_*`` settings: those djwork understands become its own, the others a warning.

Celery's Django integration reads ``CELERY_``-prefixed settings
(``app.config_from_object('django.conf:settings', namespace='CELERY')``);
Celery 3's names (``CELERY_ALWAYS_EAGER``) are read too. A project moving to
djwork keeps them: ``MAPPED`` turns each into the ``DJWORK`` key of the same
meaning (a key ``DJWORK`` gives itself wins), ``ACCEPTED`` are the ones djwork
always behaves as (quiet while their value says so), and any other
``CELERY_*`` setting is a system-check warning (djwork.W010) naming the djwork
equivalent or saying there is none: ignoring one silently hid, for instance,
that ``CELERY_TASK_ALWAYS_EAGER`` no longer made tests eager. A mapped value
djwork can't use is djwork.W011, saying why. docs/celery.md, Settings.

Imports nothing of djwork but djwork.schedules: djwork.settings.conf builds on it.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Mapping
from typing import Any

from django.conf import settings
from django.core.checks import CheckMessage, Warning

from djwork.schedules import crontab

PREFIX = "CELERY_"

# Celery 3's names (without the namespace) -> Celery 4+'s.
OLD_NAMES = {
    "always_eager": "task_always_eager", "routes": "task_routes", "default_queue": "task_default_queue",
    "acks_late": "task_acks_late", "ignore_result": "task_ignore_result", "task_result_expires": "result_expires",
    "track_started": "task_track_started", "eager_propagates_exceptions": "task_eager_propagates",
    "celeryd_concurrency": "worker_concurrency", "celerybeat_schedule": "beat_schedule",
    "celeryd_task_soft_time_limit": "task_soft_time_limit",
    "celeryd_task_time_limit": "task_time_limit",
}


class Unusable(ValueError):
    """A mapped Celery setting whose value djwork can't take: said by a djwork.W011 warning."""


def given() -> dict[str, Any]:
    """Every ``CELERY_*`` Django setting, by Celery's lower-case name (``task_always_eager``)."""
    found: dict[str, Any] = {}
    for attribute in dir(settings):
        if attribute.startswith(PREFIX) and attribute.isupper():
            name = attribute[len(PREFIX):].lower()
            found[OLD_NAMES.get(name, name)] = getattr(settings, attribute)
    return found


def _flag(value: Any) -> bool:
    if not isinstance(value, bool):
        raise Unusable(f"must be True or False, got {value!r}")
    return value


def _seconds(value: Any) -> float:
    if isinstance(value, dt.timedelta):
        value = value.total_seconds()
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0:
        raise Unusable(f"must be a number of seconds > 0 or a timedelta, got {value!r}")
    return value


def _broker(value: Any) -> str:
    if not isinstance(value, str) or not value.startswith(("redis://", "rediss://", "unix://", "redis+sentinel://")):
        raise Unusable(f"djwork runs on Redis only (redis://, rediss://, unix://), got {value!r}")
    return value


def _routes(value: Any) -> dict[str, str]:
    """``{'name or glob': 'queue' or {'queue': 'queue'}}``, or a list of such dicts (first match wins)."""
    tables = value if isinstance(value, (list, tuple)) else [value]
    routes: dict[str, str] = {}
    for table in tables:
        if not isinstance(table, Mapping):
            raise Unusable("only dicts of task name (or glob) -> queue are understood, not router functions or "
                           f"classes: got {table!r}")
        for pattern, route in table.items():
            queue = route.get("queue") if isinstance(route, Mapping) else route
            if not isinstance(pattern, str) or not isinstance(queue, str):
                raise Unusable(f"route {pattern!r}: {route!r} names no queue (a string, or {{'queue': name}})")
            routes.setdefault(pattern, queue)
    return routes


def _cron(schedule: Any, name: str) -> str:
    if isinstance(schedule, crontab):
        return schedule.cron
    seconds = _seconds(schedule)
    for unit, per, field in ((60, 60, "*/{} * * * *"), (3600, 24, "0 */{} * * *")):
        count = seconds / unit
        if count == int(count) and 1 <= count < per and per % int(count) == 0:
            return field.format(int(count)) if count > 1 else field.replace("*/{}", "*")
    if seconds == 86400:
        return "0 0 * * *"
    raise Unusable(f"beat entry {name!r}: every {seconds:g} s has no cron form; periodic entries are cron lines: "
                   "use crontab() (docs/periodic.md)")


def beat_entries(schedule: Any, timezone: Any = None) -> list[dict[str, Any]]:
    """``beat_schedule`` as ``PERIODIC`` entries (docs/periodic.md); an entry djwork can't take raises Unusable."""
    if not isinstance(schedule, Mapping):
        raise Unusable(f"must be a dict of entries, got {schedule!r}")
    entries = []
    for name, entry in schedule.items():
        if not isinstance(entry, Mapping) or not isinstance(entry.get("task"), str):
            raise Unusable(f"beat entry {name!r} names no task")
        options = dict(entry.get("options") or {})
        queue = options.pop("queue", None)
        unknown = sorted(set(entry) - {"task", "schedule", "args", "kwargs", "options"}) + sorted(options)
        if unknown:
            raise Unusable(f"beat entry {name!r}: {unknown} have no periodic-entry counterpart (docs/periodic.md)")
        periodic = {"name": str(name), "cron": _cron(entry.get("schedule"), str(name)), "job": entry["task"],
                    "args": list(entry.get("args") or []), "kwargs": dict(entry.get("kwargs") or {})}
        if queue is not None:
            periodic["queue"] = queue
        if isinstance(timezone, str):
            periodic["tz"] = timezone
        entries.append(periodic)
    return entries


# Celery setting -> (the DJWORK key it becomes, how its value becomes that key's).
MAPPED: dict[str, tuple[str, Callable[[Any], Any]]] = {
    "broker_url": ("REDIS_URL", _broker),
    "result_backend": ("RESULTS", lambda value: bool(value)),
    "task_ignore_result": ("RESULTS", lambda value: not _flag(value)),
    "result_expires": ("RESULT_TTL", lambda value: int(_seconds(value))),
    "task_track_started": ("TRACK_STARTED", _flag),
    "task_always_eager": ("ALWAYS_EAGER", _flag),
    "task_allow_error_cb_on_chord_header": ("CHORD_HEADER_ERRBACKS", _flag),
    "worker_concurrency": ("CONCURRENCY", int),
    "task_soft_time_limit": ("SOFT_TIME_LIMIT", _seconds),
    "task_time_limit": ("TIME_LIMIT", _seconds),
    "task_routes": ("ROUTES", _routes),
    "task_default_queue": ("DEFAULT_QUEUE", str),
}

# Celery settings djwork always behaves as, with the value that says so (another value is djwork.W011).
ACCEPTED: dict[str, tuple[Callable[[Any], bool], str]] = {
    "task_acks_late": (lambda value: True, ""),
    "task_acks_on_failure_or_timeout": (lambda value: True, ""),
    "task_reject_on_worker_lost": (lambda value: True, ""),
    "task_eager_propagates": (lambda value: value is True,
                              "djwork always raises a job's exception at its eager push (task_eager_propagates=True)"),
    "task_serializer": (lambda value: value == "json", "djwork writes JSON only"),
    "result_serializer": (lambda value: value == "json", "djwork stores results as JSON only"),
    "accept_content": (lambda value: list(value) == ["json"], "djwork reads JSON only"),
    "result_accept_content": (lambda value: value is None or list(value) == ["json"], "djwork reads JSON only"),
    "enable_utc": (lambda value: True, ""),
    "timezone": (lambda value: True, ""),  # the time zone of the beat entries read as periodic entries
}

# What a Celery setting djwork does not read is in djwork (djwork.W010's hint); any other: none.
EQUIVALENTS = {
    "broker_transport_options": "DJWORK['REDIS_OPTIONS'] (redis-py connection options)",
    "broker_connection_retry": "DJWORK['REDIS_MAX_ATTEMPTS'] and REDIS_BACKOFF_BASE/CAP (docs/reliability.md)",
    "broker_connection_retry_on_startup": "DJWORK['REDIS_MAX_ATTEMPTS'] (docs/reliability.md)",
    "broker_connection_max_retries": "DJWORK['REDIS_MAX_ATTEMPTS']",
    "broker_pool_limit": "DJWORK['POOL_SIZE']",
    "result_backend_transport_options": "none needed: results live in DJWORK['REDIS_URL']'s Redis",
    "result_extended": "none needed: the result record always holds the job's name, args and kwargs are in its payload",
    "task_queues": "DJWORK['QUEUES'] (the queues workers take, in order or by weight)",
    "task_create_missing_queues": "none needed: a queue exists once a job is pushed to it",
    "task_default_rate_limit": "rate_limit= on each job (docs/limiters.md)",
    "task_annotations": "the options on each job's decorator (@djwork.shared_task(rate_limit=..., ...))",
    "task_default_retry_delay": "default_retry_delay= on each job, or a djwork.Task base class attribute",
    "task_publish_retry": "none: a write is never re-sent (docs/celery.md, retry_policy); DJWORK['REDIS_MAX_ATTEMPTS']",
    "task_publish_retry_policy": "none: a write is never re-sent (docs/celery.md, retry_policy)",
    "worker_prefetch_multiplier": "none needed: each free thread takes one job (reliable fetch, docs/reliability.md)",
    "worker_max_tasks_per_child": "none: jobs run on threads; `runworkers --processes N` restarts a crashed child",
    "worker_max_memory_per_child": "none: jobs run on threads (docs/deployment.md)",
    "worker_send_task_events": "none needed: the dashboard reads Redis (docs/dashboard.md)",
    "task_send_sent_event": "none needed: the before/after_task_publish signals (djwork.signals)",
    "worker_hijack_root_logger": "none: djwork logs through Django's LOGGING (docs/logging.md)",
    "beat_scheduler": "none needed: periodic entries are run by the leader worker (docs/periodic.md)",
    "task_store_eager_result": "none needed: eager results are kept in memory for get() (docs/testing.md)",
}


def as_djwork(found: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The DJWORK keys the ``CELERY_*`` settings give (values djwork can't use are left out: see ``check``)."""
    found = given() if found is None else found
    values: dict[str, Any] = {}
    for name, value in found.items():
        if name in MAPPED:
            key, convert = MAPPED[name]
            try:
                converted = convert(value)
            except (Unusable, TypeError, ValueError):
                continue
            if name == "result_backend" and "task_ignore_result" in found:
                continue  # task_ignore_result says whether results are kept, whatever the backend
            values[key] = converted
    if "beat_schedule" in found:
        try:
            values["PERIODIC"] = beat_entries(found["beat_schedule"], found.get("timezone"))
        except (Unusable, TypeError):
            pass
    if "task_default_queue" in values:
        values["QUEUES"] = [values["DEFAULT_QUEUE"]]  # Celery's worker takes its default queue
    return values


def check(found: Mapping[str, Any] | None = None) -> list[CheckMessage]:
    """djwork.W010 for each Celery setting djwork does not read; djwork.W011 for a value it can't use."""
    found = given() if found is None else found
    messages: list[CheckMessage] = []
    for name, value in sorted(found.items()):
        setting = f"{PREFIX}{name.upper()}"
        if name in MAPPED:
            key, convert = MAPPED[name]
            try:
                convert(value)
            except (Unusable, TypeError, ValueError) as problem:
                messages.append(Warning(f"{setting} is not used: {problem}.", id="djwork.W011",
                                        hint=f"djwork's setting for it is DJWORK[{key!r}] (docs/settings.md)."))
        elif name == "beat_schedule":
            try:
                beat_entries(value, found.get("timezone"))
            except (Unusable, TypeError) as problem:
                messages.append(Warning(f"{setting} is not used: {problem}.", id="djwork.W011",
                                        hint="Write it as DJWORK['PERIODIC'] entries (docs/periodic.md)."))
        elif name in ACCEPTED:
            accepts, why = ACCEPTED[name]
            if not accepts(value):
                messages.append(Warning(f"{setting} = {value!r} has no effect: {why}.", id="djwork.W011",
                                        hint="Remove it (docs/celery.md, Settings)."))
        else:
            equivalent = EQUIVALENTS.get(name)
            messages.append(Warning(
                f"{setting} is a Celery setting djwork does not read.", id="djwork.W010",
                hint=f"djwork's equivalent: {equivalent}." if equivalent else
                "djwork has no equivalent; remove it. docs/celery.md, Settings, lists the CELERY_* settings "
                "djwork reads."))
    return messages
