"""Reading queues back: the one job an enqueue wrote, the in-progress lists a worker left."""

from __future__ import annotations

import json

from djwork.redis import keys


def only_job(redis, queue: str = "default") -> dict:
    (raw,) = redis.lrange(f"queue:{queue}", 0, -1)
    return json.loads(raw)


def in_progress_left(redis) -> list[str]:
    """The registered in-progress lists still holding a job (a job fetched and not yet acked)."""
    return [member.decode() for member in redis.smembers(keys.IN_PROGRESS_REGISTRY) if redis.llen(member)]
