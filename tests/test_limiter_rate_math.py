"""The limiters' arithmetic that runs in Python, directly: rate strings, intervals, sizes; no Redis.

What Redis decides (admissions in a window, bucket refills) is in the Lua
scripts and tested against the private server (tests/test_limiter_rate.py);
this is the part before them: every accepted rate is never looser than asked.
"""

from __future__ import annotations

import datetime as dt
import math

import pytest

from djwork.limiter.celery_rate import parse_rate
from djwork.limiter.names import INTERVALS, interval_seconds, positive_points, positive_size, seconds


@pytest.mark.parametrize("rate", ["1/s", "7/m", "100/h", "0.5/s", "2.5/m", "0.1/h", "3", 0.25, 12, "1.999/s"])
def test_a_parsed_rate_is_never_looser_than_asked(rate):
    asked = float(rate.split("/")[0]) if isinstance(rate, str) else float(rate)
    unit = {"s": 1, "m": 60, "h": 3600}[rate.split("/")[1]] if isinstance(rate, str) and "/" in rate else 1
    spec = parse_rate(rate)
    assert spec.count >= 1 and spec.interval > 0
    assert spec.count / spec.interval <= asked / unit * (1 + 1e-12)


def test_below_one_per_period_becomes_one_per_longer_period():
    assert (parse_rate("0.5/s").count, parse_rate("0.5/s").interval) == (1, 2.0)
    assert math.isclose(parse_rate("0.1/h").interval, 36_000)


@pytest.mark.parametrize(("given", "expected"), [("second", 1.0), ("minute", 60.0), ("hour", 3600.0),
                                                  ("day", 86_400.0), (5, 5.0), (0.25, 0.25),
                                                  (dt.timedelta(minutes=2), 120.0)])
def test_an_interval_is_a_name_a_number_of_seconds_or_a_timedelta(given, expected):
    assert interval_seconds(given) == expected


def test_every_interval_name_is_a_positive_number_of_seconds():
    assert all(value > 0 for value in INTERVALS.values())


@pytest.mark.parametrize("bad", ["week", "", 0, -1, float("inf"), float("nan"), True, None, dt.timedelta(0)])
def test_a_bad_interval_is_refused_naming_it(bad):
    with pytest.raises(ValueError, match="interval"):
        interval_seconds(bad)


def test_zero_seconds_only_where_allowed():
    assert seconds(0, "wait_timeout", allow_zero=True) == 0.0
    with pytest.raises(ValueError, match="more than zero"):
        seconds(0, "lock_timeout")


@pytest.mark.parametrize("bad", [0, -3, 1.5, "2", True, None])
def test_a_size_is_a_whole_number_of_at_least_one(bad):
    with pytest.raises(ValueError, match="size"):
        positive_size(bad)


@pytest.mark.parametrize("bad", [0, -1, float("nan"), float("inf"), "1", False])
def test_points_are_a_finite_number_above_zero(bad):
    with pytest.raises(ValueError, match="points"):
        positive_points(bad, "points")
