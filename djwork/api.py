"""The read/admin side of a djwork (or Sidekiq) cluster: what the dashboard and users' code call.

The worker never uses this module (Sidekiq's rule for its api.rb): it is a
read model over the keys in WIRE.md.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from djwork import keys
from djwork import redis as redis_layer


def _to_int(value: Any) -> int:
    try:
        return int(value or 0)
    except (TypeError, ValueError):
        return 0


@dataclass(frozen=True)
class Stats:
    processed: int
    failed: int
    scheduled: int
    retries: int
    dead: int
    processes: int
    queues: dict[str, int]

    @property
    def enqueued(self) -> int:
        return sum(self.queues.values())

    @classmethod
    def fetch(cls) -> Stats:
        def read(conn: Any) -> Stats:
            pipe = conn.pipeline(transaction=False)
            pipe.get(keys.STAT_PROCESSED)
            pipe.get(keys.STAT_FAILED)
            pipe.zcard(keys.SCHEDULE)
            pipe.zcard(keys.RETRY)
            pipe.zcard(keys.DEAD)
            pipe.scard(keys.PROCESSES)
            pipe.smembers(keys.QUEUES)
            processed, failed, scheduled, retries, dead, processes, names = pipe.execute()
            names = sorted(name.decode() for name in names)
            pipe = conn.pipeline(transaction=False)
            for name in names:
                pipe.llen(keys.queue(name))
            sizes = pipe.execute(raise_on_error=False)
            return cls(
                processed=_to_int(processed), failed=_to_int(failed), scheduled=scheduled,
                retries=retries, dead=dead, processes=processes,
                queues={name: size if isinstance(size, int) else 0 for name, size in zip(names, sizes, strict=True)},
            )

        return redis_layer.run(read, idempotent=True, purpose="admin")
