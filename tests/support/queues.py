"""Reading what an enqueue wrote: the one job on a queue."""

from __future__ import annotations

import json


def only_job(redis, queue: str = "default") -> dict:
    (raw,) = redis.lrange(f"queue:{queue}", 0, -1)
    return json.loads(raw)
