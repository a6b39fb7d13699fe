"""Enqueue options checked at the call, with an error naming the option and the job.

A bad option used to be written as given: a queue named ``"has spaces"`` or
``5`` that no worker can take and the dashboard can't open, ``""`` silently
turned into ``default``, a NaN or infinite delay that runs at once or never,
``eta="tomorrow"`` failing with a bare float conversion. Every such value is
refused before anything reaches Redis. Queue names follow one rule
everywhere: settings, the command line, enqueue and the dashboard's URLs.
"""

from __future__ import annotations

import datetime as dt
import math
import re
import time
from typing import Any

from django.utils import timezone

from djwork.settings.kinds import QUEUE_NAME

# Further ahead than this is a bug (a millisecond epoch is ~50,000 years
# ahead, 1e20 seconds more), not a plan: such a job would sit in `schedule` for good.
MAX_HORIZON = 100 * 365 * 24 * 3600
# Sidekiq's jids are 24 hex digits, Celery's task ids UUIDs: letters, digits
# and a little punctuation, nothing a key, a log line or a page must escape.
JID = re.compile(r"\A[A-Za-z0-9_.:\-]{1,128}\Z")
QUEUE_RULE = "ASCII letters of either case, digits and _ : . - only, not empty"


class OptionError(ValueError, TypeError):
    """A bad enqueue option. A ValueError, and a TypeError as the older option checks raised."""


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def check_queue(value: Any, where: str, option: str = "queue") -> str:
    if not isinstance(value, str) or not QUEUE_NAME.match(value):
        raise OptionError(f"{where}: {option} {value!r} is not a queue name ({QUEUE_RULE})")
    return value


def check_jid(value: Any, where: str) -> str:
    if not isinstance(value, str) or not JID.match(value):
        raise OptionError(f"{where}: jid {value!r} must be 1-128 letters, digits, _ . : or -")
    return value


def seconds(value: Any, where: str, option: str) -> float:
    """A delay (``countdown``, ``perform_in``, ``expires``): a timedelta or a finite number of seconds."""
    if isinstance(value, dt.timedelta):
        amount = value.total_seconds()
    elif _is_number(value):
        amount = float(value)
    else:
        raise OptionError(f"{where}: {option} must be a number of seconds or a timedelta, got {value!r}")
    if not math.isfinite(amount):
        raise OptionError(f"{where}: {option} must be a finite number of seconds, got {value!r}")
    return amount


def time_limit(value: Any, where: str, option: str) -> float | int:
    """A ``soft_time_limit``/``time_limit``: a positive, finite number of seconds (kept as given: it is stored)."""
    if not _is_number(value) or not math.isfinite(value) or value <= 0:
        raise OptionError(f"{where}: {option} must be a positive number of seconds, got {value!r}")
    return value


def check_time_limits(options: dict[str, Any], where: str, *, order: bool = True) -> None:
    """Each limit a positive number; with ``order``, the soft one not past the hard one too."""
    soft, hard = options.get("soft_time_limit"), options.get("time_limit")
    if soft is not None:
        time_limit(soft, where, "soft_time_limit")
    if hard is not None:
        time_limit(hard, where, "time_limit")
    if order:
        check_time_limit_order(options, where)


def time_limits_misordered(options: dict[str, Any]) -> bool:
    soft, hard = options.get("soft_time_limit"), options.get("time_limit")
    return _is_number(soft) and _is_number(hard) and soft > hard


def check_time_limit_order(options: dict[str, Any], where: str) -> None:
    """Celery's rule and words, at the call: a task may be declared so (``manage.py check`` reports it,
    djwork.E075), but calling it is refused, as the soft limit is the warning before the hard one."""
    if time_limits_misordered(options):
        raise OptionError(f"{where}: soft_time_limit must be less than or equal to time_limit (soft_time_limit="
                          f"{options['soft_time_limit']!r}, time_limit={options['time_limit']!r})")


def moment(value: Any, where: str, option: str) -> float:
    """A point in time (``eta``, ``perform_at``): a datetime (naive = Django's time zone) or an epoch."""
    if isinstance(value, dt.datetime):
        if timezone.is_naive(value):
            value = timezone.make_aware(value, timezone.get_default_timezone())
        epoch = value.timestamp()
    elif _is_number(value):
        epoch = float(value)
        if not math.isfinite(epoch):
            raise OptionError(f"{where}: {option} must be a finite epoch, got {value!r}")
    else:
        raise OptionError(f"{where}: {option} must be a datetime or epoch seconds, got {value!r}")
    return within_horizon(epoch, where, option, value)


def after(delay: float, where: str, option: str, given: Any) -> float:
    """The epoch ``delay`` seconds from now, refused beyond the horizon."""
    return within_horizon(time.time() + delay, where, option, given)


def within_horizon(epoch: float, where: str, option: str, given: Any) -> float:
    if epoch > time.time() + MAX_HORIZON:
        raise OptionError(f"{where}: {option} {given!r} is more than 100 years ahead (a millisecond epoch?)")
    return epoch


def run_at(eta: Any, countdown: Any, where: str) -> float | None:
    """A call's run-at epoch from ``eta`` (wins) or ``countdown``; None = now."""
    if eta is not None:
        return moment(eta, where, "eta")
    if countdown is not None:
        return after(seconds(countdown, where, "countdown"), where, "countdown", countdown)
    return None


def expires_at(expires: Any, at: float | None, where: str) -> float:
    """The epoch after which a job is dropped unrun: a datetime as given, a duration from when the job is due.

    Counting a duration from the call instead would drop every scheduled copy whose delay is
    longer than its expiry, unrun (Sidekiq Pro also counts from when the job is due).
    """
    if isinstance(expires, dt.datetime):
        return moment(expires, where, "expires")
    return within_horizon(max(at or 0.0, time.time()) + seconds(expires, where, "expires"), where, "expires",
                          expires)
