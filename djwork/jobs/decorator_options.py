"""The options ``@djwork.job`` / ``@djwork.shared_task`` accept, merged with a ``base=`` class's defaults.

An option given to the decorator wins; otherwise the ``djwork.Task`` subclass's
class attribute of the same name is used (Celery's rule). Each value is checked
once, at import time, with an error naming the job and the option: a misspelt
option (``max_retry=3``) used to be lost silently by Celery-style code that
expected it to work. docs/celery.md, Options.
"""

from __future__ import annotations

from typing import Any

from djwork import options as enqueue_options
from djwork.jobs import argument_reprs, message_properties
from djwork.jobs import priority as job_priority
from djwork.jobs.enqueue import ABSOLUTE_EPOCH_THRESHOLD
from djwork.payload import check_arguments

# Celery options djwork accepts because it behaves so already, whatever the value (docs/celery.md):
# a job is acknowledged only after it ends (reliable fetch), a failed one is filed in retry/dead,
# a job whose worker died is handed back by orphan recovery.
GUARANTEED = ("acks_late", "acks_on_failure_or_timeout", "reject_on_worker_lost")

# Options whose default a djwork.Task subclass may set as a class attribute.
CLASS_DEFAULTS = ("name", "queue", "max_retries", "default_retry_delay", "autoretry_for", "dont_autoretry_for",
                  "retry_kwargs", "retry_backoff", "retry_backoff_max", "retry_jitter", "rate_limit", "expires",
                  "serializer", "typing", "priority", "track_started", "failures", *GUARANTEED)

# Options only the decorator gives.
DECORATOR_ONLY = ("retry", "bind", "ignore_result", "soft_time_limit", "time_limit", "backtrace", "dead", "tags",
                  "retry_queue", "retry_for", "limits", "unique_for", "unique_until", "unique_args",
                  "pydantic", "pydantic_strict", "pydantic_context", "pydantic_dump_kwargs")

RETRY_KWARGS = ("max_retries", "countdown")

FAILURES = ("celery", "sidekiq")

# Celery's Task.max_retries default: the retries a "celery" job asks for get at most this many.
CELERY_MAX_RETRIES = 3


def collect(cls: type, where: str, given: dict[str, Any]) -> dict[str, Any]:
    """Every option of a job: ``given`` over ``cls``'s class attributes; unknown or bad values refused."""
    unknown = set(given) - set(CLASS_DEFAULTS) - set(DECORATOR_ONLY)
    if unknown:
        raise TypeError(f"{where}: unknown job option(s) {sorted(unknown)} (docs/celery.md lists the options "
                        "djwork accepts and those it refuses)")
    merged = {key: given[key] if key in given else getattr(cls, key) for key in CLASS_DEFAULTS}
    merged.update({key: given[key] for key in DECORATOR_ONLY if key in given})
    check_serializer(merged["serializer"], where)
    job_priority.check_celery_priority(merged["priority"], where)
    merged["retry_kwargs"] = check_retry_kwargs(merged["retry_kwargs"], where)
    for option in ("autoretry_for", "dont_autoretry_for"):
        merged[option] = exception_classes(merged[option], where, option)
    for option in ("retry_jitter", "typing", *GUARANTEED):
        if not isinstance(merged[option], bool):
            raise TypeError(f"{where}: {option} must be True or False, got {merged[option]!r}")
    if merged["track_started"] is not None and not isinstance(merged["track_started"], bool):
        raise TypeError(f"{where}: track_started must be True, False or None (the TRACK_STARTED setting decides), "
                        f"got {merged['track_started']!r}")
    if merged["failures"] not in (None, *FAILURES):
        raise TypeError(f"{where}: failures must be 'celery' (an exception fails the job unless it asks for a retry) "
                        f"or 'sidekiq' (every exception retries), got {merged['failures']!r}")
    backoff = merged["retry_backoff"]
    if not isinstance(backoff, (bool, int, float)) or backoff < 0:
        raise TypeError(f"{where}: retry_backoff must be True, False or a factor in seconds, got {backoff!r}")
    enqueue_options.seconds(merged["retry_backoff_max"], where, "retry_backoff_max")
    enqueue_options.seconds(merged["default_retry_delay"], where, "default_retry_delay")
    return merged


def check_serializer(value: Any, where: str) -> None:
    if value != "json":
        raise enqueue_options.OptionError(
            f"{where}: serializer={value!r} is not supported: djwork writes JSON only (Sidekiq's payload), "
            "so pass arguments JSON can carry (ids, not objects)")


def check_retry_kwargs(value: Any, where: str) -> dict[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise TypeError(f"{where}: retry_kwargs must be a dict, got {value!r}")
    unknown = set(value) - set(RETRY_KWARGS)
    if unknown:
        raise TypeError(f"{where}: retry_kwargs supports {list(RETRY_KWARGS)} only, not {sorted(unknown)}")
    limit = value.get("max_retries")
    if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 0):
        raise TypeError(f"{where}: retry_kwargs max_retries must be a number of retries, got {limit!r}")
    if "countdown" in value:
        enqueue_options.seconds(value["countdown"], where, "retry_kwargs countdown")
    return dict(value)


def exception_classes(value: Any, where: str, option: str) -> tuple[type[BaseException], ...]:
    classes = tuple(value) if isinstance(value, (tuple, list)) else (value,)
    for kind in classes:
        if not (isinstance(kind, type) and issubclass(kind, BaseException)):
            raise TypeError(f"{where}: {option} must list exception classes, got {kind!r}")
    return classes


def call_options(options: dict[str, Any], where: str, jid: str | None) -> tuple[str | None, dict[str, Any]]:
    """Take Celery's call options out of ``options``: the jid to use, and the payload fields they add.

    ``task_id`` is the jid; ``priority`` (0..9, Celery-on-Redis's numbers) puts the job in one of its
    queue's lanes (docs/priority.md); a serializer other than JSON is refused; ``retry_policy`` is accepted
    and has no effect (a write is never re-sent after it was sent, djwork/client/__init__.py);
    ``headers`` (JSON values) ride in the payload, read as ``self.request.headers``; so do the message
    properties (``app_id``, ...: ``self.request.properties``) and ``argsrepr``/``kwargsrepr``.
    """
    fields: dict[str, Any] = {}
    if "task_id" in options:
        task_id = options.pop("task_id")
        if task_id is not None:
            if jid is not None and jid != task_id:
                raise enqueue_options.OptionError(f"{where}: task_id {task_id!r} and jid {jid!r} disagree")
            jid = task_id
    if "priority" in options:
        fields.update(job_priority.celery_fields(job_priority.check_celery_priority(options.pop("priority"), where)))
    if "serializer" in options:
        check_serializer(options.pop("serializer"), where)
    options.pop("retry_policy", None)
    headers = options.pop("headers", None)
    if headers is not None:
        if not isinstance(headers, dict) or not all(isinstance(key, str) for key in headers):
            raise enqueue_options.OptionError(f"{where}: headers must be a dict with string keys, got {headers!r}")
        check_arguments(f"{where} headers", [], headers)
        fields["headers"] = headers
    fields.update(message_properties.take(options, where))
    fields.update(argument_reprs.take(options, where))
    return jid, fields


def check_retry(value: Any, where: str) -> bool | int:
    """``retry`` is True, False or an Integer on the wire (docs/wire.md, Jobs): refuse anything else."""
    if isinstance(value, int):  # bool is an int
        return value
    raise TypeError(f"{where}: retry must be True, False or a number of retries, got {value!r}")


def check_ignore_result(value: Any, where: Any) -> bool | None:
    if value is None or isinstance(value, bool):
        return value
    name = where if isinstance(where, str) else getattr(where, "__qualname__", where)
    raise TypeError(f"{name}: ignore_result must be True or False, got {value!r}")


def check_payload_options(options: dict[str, Any], where: str, *, order: bool = True) -> None:
    """The Sidekiq options copied into the payload must have the types Sidekiq reads (docs/wire.md, Jobs);
    without ``order``, time limits in the wrong order pass (a declaration: its call refuses them)."""
    tags = options.get("tags")
    if tags is not None and not (isinstance(tags, list) and all(isinstance(t, str) for t in tags)):
        raise TypeError(f"{where}: tags must be a list of strings, got {tags!r}")
    backtrace = options.get("backtrace")
    if backtrace is not None and not isinstance(backtrace, int):
        raise TypeError(f"{where}: backtrace must be True, False or a number of lines, got {backtrace!r}")
    dead = options.get("dead")
    if dead is not None and not isinstance(dead, bool):
        raise TypeError(f"{where}: dead must be True or False, got {dead!r}")
    retry_queue = options.get("retry_queue")
    if retry_queue is not None:
        enqueue_options.check_queue(retry_queue, where, "retry_queue")
    retry_for = options.get("retry_for")
    if retry_for is not None and (isinstance(retry_for, bool) or not isinstance(retry_for, int)
                                  or not 0 < retry_for < ABSOLUTE_EPOCH_THRESHOLD):
        raise TypeError(f"{where}: retry_for must be a number of seconds below 1e9, got {retry_for!r}")
    enqueue_options.check_time_limits(options, where, order=order)
