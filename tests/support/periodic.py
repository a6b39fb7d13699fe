"""A periodic ticker on a simulated clock (TEST_CLOCK) against the private Redis: its entries and what it queued."""

from __future__ import annotations

import datetime as dt
import json
from typing import Any

from djwork.settings.conf import build_config
from djwork.worker.periodic import PeriodicTicker

HOUR = 3600
BASE = dt.datetime(2026, 6, 1, 0, 0, tzinfo=dt.UTC).timestamp()  # an exact hour, simulated
OUT = "queue:periodic-out"


class StandingLeader:
    """The lease held for good: these tests are about the claim, not the election."""

    enabled = True
    term = 1

    def is_leader(self) -> bool:
        return True


def redis_now(raw_redis) -> float:
    seconds, micros = raw_redis.time()
    return seconds + micros / 1_000_000


def ticker_at(raw_redis, simulated: float, *entries: dict[str, Any], speed: float = 1.0) -> PeriodicTicker:
    """A ticker whose clock reads ``simulated`` (epoch seconds) now, running ``entries``."""
    config = build_config({"PERIODIC": list(entries),
                           "TEST_CLOCK": {"origin": redis_now(raw_redis), "start": simulated, "speed": speed}})
    return PeriodicTicker(config, StandingLeader(), "test-process")


def entry(**options: Any) -> dict[str, Any]:
    return {"cron": "0 * * * *", "job": "tests.periodic_jobs.tick", **options}


def queued(raw_redis) -> list[dict[str, Any]]:
    return [json.loads(raw) for raw in reversed(raw_redis.lrange(OUT, 0, -1))]
