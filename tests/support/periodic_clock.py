"""Periodic workers on a fast simulated clock (TEST_CLOCK): the settings and readers their tests share."""

from __future__ import annotations

import json
from typing import Any

SPEED = 20
MINUTE_MS = 60_000
EVERY_MINUTE = {"cron": "* * * * *", "job": "tests.periodic_jobs.tick", "name": "every-minute"}


def redis_now(raw_redis) -> float:
    seconds, micros = raw_redis.time()
    return seconds + micros / 1_000_000


def fast_clock(raw_redis, **more: float) -> dict[str, float]:
    return {"speed": SPEED, "origin": redis_now(raw_redis), **more}


def overrides(clock: dict[str, float], *entries: dict[str, Any], **more: Any) -> dict[str, Any]:
    return {"PERIODIC": list(entries), "TEST_CLOCK": clock, "LOG_JOBS": False, **more}


def enqueued(raw_redis) -> list[dict[str, Any]]:
    return [json.loads(raw) for raw in reversed(raw_redis.lrange("queue:periodic-out", 0, -1))]
