"""Due `schedule` and `retry` entries onto their queues on a Redis Cluster: push once, then remove.

On one server ``lua/promote.lua`` pushes and removes in one step. On a cluster the set and the queue
live in different slots, so a promotion is two steps, each batch of them one round trip per node:

1. ``lua/push_once.lua`` in the queue's slot, the move named by a digest of the set and the entry: the
   push happens once per move, however often it is repeated;
2. ``ZREM`` of the entry from its set, for every entry step 1 pushed or found pushed already; then the
   queues listed (``SADD queues``).

A crash between leaves the entry due in its set: the next pass runs the move again, the push is a
no-op (the dedupe remembers the move for an hour) and the entry is removed. Two pollers promoting the
same entry at once push it once. An entry that is not a job goes to `dead` (filed first, removed after).
"""

from __future__ import annotations

import hashlib
import time
from typing import Any

from redis.exceptions import NoScriptError

from djwork import dead
from djwork import redis as redis_layer
from djwork.payload import PayloadError, dumps, loads, stored_payload
from djwork.redis import key_layout, keys, lanes, scripts
from djwork.worker.scheduled import ScheduledPoller, logger


def move_name(set_key: str, member: bytes) -> str:
    """What names one move of ``member`` out of ``set_key`` in the queue's push dedupe."""
    return f"{set_key}:{hashlib.sha1(member).hexdigest()}"


class ClusterScheduledPoller(ScheduledPoller):
    def _promote(self, set_key: str, entries: list[bytes]) -> tuple[int, int]:
        now = time.time()
        pushes: list[tuple[bytes, str]] = []  # (entry, its queue) for each push_once call
        commands: list[tuple[Any, ...]] = []
        buried = 0
        for entry in entries:
            try:
                job = loads(stored_payload(entry))
            except PayloadError as error:
                buried += self._bury(set_key, entry, str(error), now)
                continue
            queue = job.get("queue") if isinstance(job.get("queue"), str) and job.get("queue") else "default"
            job.pop("at", None)
            job["enqueued_at"] = now
            pushes.append((entry, queue))
            # A prioritised job to its lane (docs/priority.md), in the queue's slot, registered after the push.
            (target, _queues, lanes_key), lane = lanes.promote_target(queue, job, key_layout.CLUSTER)
            commands.append(("EVALSHA", scripts.sha("push_once"), 3, keys.pushed(queue), target, lanes_key,
                             move_name(set_key, entry), dumps(job), repr(now), keys.PUSHED_HORIZON, lane))
        if not commands:
            return 0, buried
        # Idempotent: a repeated push_once pushes nothing; the ZREMs and the SADD repeat harmlessly.
        replies = redis_layer.run(lambda conn: self._pushed(conn, commands), idempotent=True)
        on_queue = []
        for (entry, queue), reply in zip(pushes, replies, strict=True):
            if isinstance(reply, Exception):  # not pushed: the entry stays due, first in line next pass
                logger.error("djwork: could not promote a job from %s: %s", set_key, reply)
            else:
                on_queue.append((entry, queue))
        if on_queue:
            removals = [("ZREM", set_key, *(entry for entry, _queue in on_queue)),
                        ("SADD", keys.QUEUES, *{queue for _entry, queue in on_queue})]
            redis_layer.run(lambda conn: redis_layer.exchange_on(conn, removals), idempotent=True)
        promoted = sum(1 for reply in replies if reply == 1)
        return promoted, len(on_queue) + buried

    @staticmethod
    def _pushed(conn: Any, commands: list[tuple[Any, ...]]) -> list[Any]:
        replies = redis_layer.exchange_on(conn, commands)
        refused = [index for index, reply in enumerate(replies) if isinstance(reply, NoScriptError)]
        if refused:
            again = redis_layer.exchange_on(conn, [("EVAL", scripts.source("push_once"), *commands[index][2:])
                                                   for index in refused])
            for index, reply in zip(refused, again, strict=True):
                replies[index] = reply
        return replies

    def _bury(self, set_key: str, member: bytes, reason: str, now: float) -> int:
        """An entry that is not a job: filed in `dead` inside a readable wrapper, then removed from its set."""
        wrapper = dead.invalid_payload(stored_payload(member), "default", f"unreadable entry in {set_key}: {reason}",
                                       now)
        logger.error("djwork: unreadable entry in %s moved to dead: %s", set_key, reason)

        def bury(conn: Any) -> int:
            scripts.evaluate(conn, "file_entry", [keys.DEAD, keys.CLUSTER_DEAD_BYTES],
                             [dumps(wrapper), repr(now), *dead.dead_trim(self.config, now)])
            return int(conn.zrem(set_key, member))

        return int(redis_layer.run(bury, idempotent=True))
