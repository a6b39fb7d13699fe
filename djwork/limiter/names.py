"""Validating what a limiter is built from: its name, sizes, intervals, timeouts.

Every check runs when the limiter is constructed (which costs no round trip),
so a bad name or size fails where it is written, with the value in the
message, instead of at its first use inside a job.
"""

from __future__ import annotations

import datetime as dt
import math
import re
from typing import Any

# Letters, digits and _ . : - (Sidekiq Enterprise allows letters, digits, _ and -; the dot and colon
# let per-tenant names read naturally: "stripe:acct_42"). Anything else could break a key's layout.
NAME = re.compile(r"\A[A-Za-z0-9_.:-]+\Z")
MAX_NAME_LENGTH = 200
INTERVALS = {"second": 1.0, "minute": 60.0, "hour": 3600.0, "day": 86400.0}
DEFAULT_TTL = 90 * 24 * 3600.0  # metadata of a limiter unused this long expires (Sidekiq Enterprise's default)
DEFAULT_WAIT_TIMEOUT = 5.0  # Sidekiq Enterprise's default for every kind
DEFAULT_LOCK_TIMEOUT = 30.0


def validate_name(name: Any) -> str:
    if not isinstance(name, str) or not NAME.match(name):
        raise ValueError(f"limiter name {name!r} is invalid: use only letters, digits and _ . : - "
                         f"(e.g. 'stripe' or 'stripe:acct_42')")
    if len(name) > MAX_NAME_LENGTH:
        raise ValueError(f"limiter name {name[:40]!r}... is {len(name)} characters long; "
                         f"at most {MAX_NAME_LENGTH} are allowed")
    return name


def seconds(value: Any, what: str, *, allow_zero: bool = False) -> float:
    """A finite number of seconds (int, float or timedelta), positive (or zero when allowed)."""
    if isinstance(value, dt.timedelta):
        value = value.total_seconds()
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise ValueError(f"{what} must be a number of seconds, not {value!r}")
    if value < 0 or (value == 0 and not allow_zero):
        raise ValueError(f"{what} must be {'zero or more' if allow_zero else 'more than zero'} seconds, "
                         f"not {value!r}")
    return float(value)


def interval_seconds(value: Any, what: str = "interval") -> float:
    """"second" | "minute" | "hour" | "day", a number of seconds, or a timedelta."""
    if isinstance(value, str):
        try:
            return INTERVALS[value]
        except KeyError:
            raise ValueError(f"{what} {value!r} is not one of {', '.join(INTERVALS)} "
                             f"(or give a number of seconds)") from None
    return seconds(value, what)


def positive_size(value: Any, what: str = "size") -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{what} must be a whole number of at least 1, not {value!r}")
    return value


def positive_points(value: Any, what: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value <= 0:
        raise ValueError(f"{what} must be a number of points above zero, not {value!r}")
    return float(value)


def validate_identity(identity: Any) -> str:
    # Tabs and newlines separate the fields of holdings and waiting entries in Redis.
    if not isinstance(identity, str) or not identity or any(char in identity for char in "\t\r\n"):
        raise ValueError(f"process identity {identity!r} must be a non-empty string without tabs or newlines")
    return identity
