"""The settings checks that need more than a kind: several problems of one value, or more than one value.

The specs of djwork.settings.table name them as their ``check``; each has
that signature (spec, merged settings, the keys the user gave). This module
imports nothing of djwork but djwork.settings.kinds.
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping
from typing import Any
from urllib.parse import parse_qs, urlparse

from django.core.checks import CheckMessage, Error, Warning
from django.utils.module_loading import import_string

from djwork.settings.kinds import QUEUE_NAME, SettingSpec, check_kind, is_integer, is_number, parse_queues

URL_SCHEMES = ("redis", "rediss", "unix")
CAPSULE_KEYS = ("QUEUES", "CONCURRENCY")
URL_HINT = "Use redis://[:password@]host:port/db, rediss://... for TLS, or unix:///path/redis.sock?db=0."
QUEUES_HINT = ('Give names, or (name, weight) pairs with integer weights >= 0: '
               '["critical", "default"] or [("critical", 3), ("default", 1)].')


def suggest(word: str, choices: Any) -> str | None:
    """The closest known name to a misspelt or lowercase one, if any is close."""
    matches = difflib.get_close_matches(word.upper(), list(choices), n=1, cutoff=0.75)
    return matches[0] if matches else None


def check_redis_url(url: Any, what: str = "DJWORK['REDIS_URL']") -> list[CheckMessage]:
    def error(problem: str) -> list[CheckMessage]:
        return [Error(f"{what} {problem}", hint=URL_HINT, id="djwork.E002")]

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


def check_url_setting(spec: SettingSpec, values: Mapping[str, Any], _given: Mapping[str, Any]) -> list[CheckMessage]:
    # With CACHE set, REDIS_URL is not used: the cache's LOCATION is checked instead.
    return [] if values["CACHE"] is not None else check_redis_url(values[spec.name])


def check_cache_setting(spec: SettingSpec, values: Mapping[str, Any], given: Mapping[str, Any]) -> list[CheckMessage]:
    from django.conf import settings

    alias = values[spec.name]
    if alias is None:
        return []
    warnings: list[CheckMessage] = []
    if "REDIS_URL" in given:
        warnings.append(Warning("DJWORK sets both CACHE and REDIS_URL; CACHE wins.", hint="Remove one of them.",
                                id="djwork.W001"))
    caches = getattr(settings, "CACHES", {})
    if not isinstance(alias, str) or alias not in caches:
        return [Error(f"DJWORK['CACHE'] names cache {alias!r}, which is not in settings.CACHES.",
                      hint=f"Use one of {sorted(caches)} or remove CACHE and set REDIS_URL.", id=spec.check_id),
                *warnings]
    backend = str(caches[alias].get("BACKEND", ""))
    if "redis" not in backend.lower():
        return [Error(f"DJWORK['CACHE'] = {alias!r} is a {backend}, not a Redis cache.", hint=spec.hint,
                      id=spec.check_id), *warnings]
    location = caches[alias].get("LOCATION")
    if isinstance(location, (list, tuple)):
        location = location[0] if location else None
    if not location:
        return [Error(f"settings.CACHES[{alias!r}] has no LOCATION, so djwork can't tell which Redis to use.",
                      hint="Set LOCATION to a redis:// URL, or remove CACHE and set REDIS_URL.", id=spec.check_id),
                *warnings]
    return [*check_redis_url(location, f"settings.CACHES[{alias!r}]['LOCATION'] (used via DJWORK['CACHE'])"),
            *warnings]


def check_queue_list(value: Any, where: str) -> list[CheckMessage]:
    try:
        queues = parse_queues(value)
    except (ValueError, TypeError) as error:
        return [Error(f"{where}: {error}.", hint=QUEUES_HINT, id="djwork.E005")]
    errors: list[CheckMessage] = []
    if not queues:
        errors.append(Error(f"{where} is empty; a worker needs at least one queue.", hint=QUEUES_HINT,
                            id="djwork.E005"))
    for name, weight in queues:
        if not QUEUE_NAME.match(name):
            errors.append(Error(f"{where}: queue name {name!r} is empty or has characters outside [a-z0-9_:.-].",
                                hint="Sidekiq's Web UI and djwork's dashboard only address such names.",
                                id="djwork.E005"))
        if weight < 0:
            errors.append(Error(f"{where}: queue {name!r} has weight {weight}.", hint=QUEUES_HINT, id="djwork.E005"))
    return errors


def check_queues_setting(spec: SettingSpec, values: Mapping[str, Any], _given: Mapping[str, Any]) -> list[CheckMessage]:
    return check_queue_list(values[spec.name], f"DJWORK[{spec.name!r}]")


def check_capsules_setting(spec: SettingSpec, values: Mapping[str, Any],
                           _given: Mapping[str, Any]) -> list[CheckMessage]:
    capsules = values[spec.name]
    if not isinstance(capsules, dict):
        return [Error("DJWORK['CAPSULES'] must be a dict of name -> {'QUEUES': [...], 'CONCURRENCY': n}.",
                      hint=spec.hint, id=spec.check_id)]
    errors: list[CheckMessage] = []
    for name, capsule in capsules.items():
        where = f"DJWORK['CAPSULES'][{name!r}]"
        if not isinstance(name, str) or not QUEUE_NAME.match(name) or name == "default":
            # 'default' is the capsule built from the top-level QUEUES/CONCURRENCY.
            errors.append(Error(f"{where}: capsule names must be non-empty [a-z0-9_:.-] strings other than "
                                "'default'.", hint=spec.hint, id=spec.check_id))
            continue
        if not isinstance(capsule, dict):
            errors.append(Error(f"{where} must be a dict, got {type(capsule).__name__}.", hint=spec.hint,
                                id=spec.check_id))
            continue
        for key in capsule:
            if key not in CAPSULE_KEYS:
                close = suggest(str(key), CAPSULE_KEYS)
                errors.append(Error(f"{where} has an unknown key {key!r}.",
                                    hint=f"Did you mean {close!r}?" if close else
                                    f"A capsule takes only {', '.join(CAPSULE_KEYS)}.", id=spec.check_id))
        errors += check_queue_list(capsule.get("QUEUES"), f"{where}['QUEUES']")
        concurrency = capsule.get("CONCURRENCY", 1)
        if not is_integer(concurrency) or concurrency < 1:
            errors.append(Error(f"{where}['CONCURRENCY'] must be an integer >= 1, got {concurrency!r}.",
                                hint="e.g. 1 for a serial queue", id=spec.check_id))
    return errors


def check_importables(spec: SettingSpec, values: Mapping[str, Any], given: Mapping[str, Any]) -> list[CheckMessage]:
    """Every entry imports (a module that fails at import is reported, not a crash of `check`) and is callable."""
    errors = check_kind(spec, values, given)
    if errors:
        return errors
    key = spec.name
    for entry in values[key]:
        entry_object = entry
        if isinstance(entry, str):
            try:
                entry_object = import_string(entry)
            except Exception as error:
                errors.append(Error(f"DJWORK[{key!r}]: {entry!r} can't be imported: {error}.",
                                    hint=f"Check the dotted path. {spec.hint}", id=spec.check_id))
                continue
        if not callable(entry_object):
            errors.append(Error(f"DJWORK[{key!r}]: {entry!r} is not callable.", hint=spec.hint, id=spec.check_id))
    return errors


def check_hook(spec: SettingSpec, values: Mapping[str, Any], given: Mapping[str, Any]) -> list[CheckMessage]:
    hook = values[spec.name]
    return [] if hook is None else check_importables(spec, {spec.name: [hook]}, given)


def check_orphan_threshold(spec: SettingSpec, values: Mapping[str, Any],
                           given: Mapping[str, Any]) -> list[CheckMessage]:
    errors = check_kind(spec, values, given)
    threshold, beat = values[spec.name], values["HEARTBEAT_INTERVAL"]
    if is_number(threshold) and is_number(beat) and threshold <= 2 * beat:
        errors.append(Error(
            f"DJWORK['ORPHAN_THRESHOLD'] ({threshold}) must exceed twice HEARTBEAT_INTERVAL ({beat}).",
            hint="A live process that missed one beat would otherwise have its running jobs recovered "
                 "and run twice.", id="djwork.E013"))
    return errors


def check_pool_size(spec: SettingSpec, values: Mapping[str, Any], _given: Mapping[str, Any]) -> list[CheckMessage]:
    size = values[spec.name]
    if size is not None and (not is_integer(size) or size < 2):
        return [Error(f"DJWORK[{spec.name!r}] must be None or an integer >= 2, got {size!r}.", hint=spec.hint,
                      id=spec.check_id)]
    return []


def check_time_limits(spec: SettingSpec, values: Mapping[str, Any], given: Mapping[str, Any]) -> list[CheckMessage]:
    """SOFT_TIME_LIMIT / TIME_LIMIT: each None or seconds > 0, and the soft one below the hard one."""
    errors = check_kind(spec, values, given)
    soft, hard = values["SOFT_TIME_LIMIT"], values["TIME_LIMIT"]
    if spec.name == "SOFT_TIME_LIMIT" and is_number(soft) and is_number(hard) and 0 < hard <= soft:
        errors.append(Error(
            f"DJWORK['SOFT_TIME_LIMIT'] ({soft}) must be below DJWORK['TIME_LIMIT'] ({hard}).",
            hint="The soft limit is the job's warning to clean up before the hard limit ends it: set it lower "
                 "(e.g. SOFT_TIME_LIMIT = 0.9 * TIME_LIMIT), or leave one of them None.", id="djwork.E074"))
    return errors


def check_track_started(spec: SettingSpec, values: Mapping[str, Any], given: Mapping[str, Any]) -> list[CheckMessage]:
    """TRACK_STARTED is a flag; on with RESULTS off (the default since results are opt-in) it does nothing for
    a job that does not ask for its result, which a project that set it before would not notice."""
    errors = check_kind(spec, values, given)
    if values[spec.name] is True and values["RESULTS"] is False:
        errors.append(Warning(
            "DJWORK['TRACK_STARTED'] is True but RESULTS is False: STARTED is recorded only for jobs that store "
            "a result, so most jobs will never show it.",
            hint="Set DJWORK['RESULTS'] = True, or ask per job with @djwork.job(ignore_result=False); "
                 "docs/celery.md, Results.", id="djwork.W002"))
    return errors
