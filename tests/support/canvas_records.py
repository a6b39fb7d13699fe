"""What the canvas test jobs (tests/canvas_jobs.py) recorded in Redis: the calls in order and the errors."""

from __future__ import annotations

import json

from tests import canvas_jobs as cj


def calls(raw_redis) -> list[str]:
    return [raw.decode() for raw in raw_redis.lrange(cj.CALLS, 0, -1)]


def errors(raw_redis) -> list[dict]:
    return [json.loads(raw) for raw in raw_redis.lrange(cj.ERRORS, 0, -1)]
