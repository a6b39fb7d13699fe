"""Orphan recovery on a Redis Cluster: the single-server step of recover_orphans.lua as three steps.

1. ``lua/orphan_owner.lua`` (the slot of ``djwork:beats``): is the owner dead on Redis's clock? If so its
   beat goes. A crash after this step leaves no beat, which the next pass also reads as dead.
2. ``lua/recover_list.lua`` (the queue's slot: list, queue, isolated list and counters share the tag):
   the list back on its queue or the isolated list, every recovery counted, poison pills left on it.
   Counted once per run of this step, exactly as on one server (the step is not replayed).
3. Each poison pill filed in `dead` first, once by its burial's name however many reapers were handed it
   (``lua/file_once.lua``, filing.py), and taken off the list after, then the emptied
   list unregistered (``LLEN``, then ``SREM`` of the registry): a crash before the SREM leaves an
   empty list registered, which the next pass finds empty and unregisters.

The poison-pill and isolation rules are unchanged: the counters live with the queue.
"""

from __future__ import annotations

from typing import Any

from djwork import redis as redis_layer
from djwork.payload import stored_payload
from djwork.redis import key_layout, keys, scripts
from djwork.worker.cluster import filing
from djwork.worker.fetch import ISOLATE_AFTER_RECOVERIES
from djwork.worker.reaper import Reaper, logger


class ClusterReaper(Reaper):
    file_failure = staticmethod(filing.file_failure)

    def _recover_list(self, list_key: str, identity: str, queue: str) -> int:
        dead_owner = redis_layer.run(lambda conn: scripts.evaluate(
            conn, "orphan_owner", [keys.BEATS], [identity, self.config.orphan_threshold]), idempotent=True)
        if not int(dead_owner):
            return 0
        # Not replayed: a replay would count every job's orphaning twice.
        reply = redis_layer.run(lambda conn: scripts.evaluate(conn, "recover_list", [
            list_key, keys.queue(queue), keys.cluster_orphan_counts(queue), keys.cluster_isolated(queue),
            key_layout.CLUSTER.lanes(queue),  # a prioritised job back to its lane, in the queue's slot
        ], [self.config.max_orphanings, ISOLATE_AFTER_RECOVERIES, key_layout.CLUSTER.lane_name(queue)]))
        requeued = int(reply[0])
        if requeued:
            logger.warning("djwork: recovered %d job(s) of dead process %s from queue %s", requeued, identity, queue)
        for raw in reply[1:]:
            self._bury(list_key, stored_payload(raw), identity, queue)

        def unregister_if_empty(conn: Any) -> None:
            if conn.llen(list_key) == 0:
                conn.srem(keys.IN_PROGRESS_REGISTRY, list_key)

        redis_layer.run(unregister_if_empty, idempotent=True)
        return requeued
